import CProcessHardening
import DevtrustEncoding
import DevtrustErrors
import DevtrustSignIn
import DevtrustTerminal

/// `login --ciba`: OpenID CIBA in poll mode for a public client. The server asks
/// the user on their own device (a phone); devtrust shows the binding message and
/// a countdown on stderr while it polls, as `--device-code` does (PollingSignIn),
/// and `--json` gives the same event stream. The auth_req_id is never shown.
/// One of `login`'s modes, which LoginCommand chooses: not a command of its own.
enum CIBALogin {
    /// The most characters of a binding message, counted as Unicode scalars (what a phone
    /// draws, each accent too): it is read on a phone's screen.
    static let bindingMessageLimit = 64
    /// The most combining marks on one character: enough for any script's accents, not a
    /// flood of them drawn over the lines around.
    static let combiningMarkLimit = 4
    /// The longest `--requested-expiry`: a day, as for a device code.
    static let requestedExpiryLimit: Int64 = 86_400

    /// What the user gave with --ciba, checked before anything goes over the network.
    struct Request {
        let loginHint: String
        let bindingMessage: String?
        let requestedExpiry: Int64?

        init(loginHint: String?, bindingMessage: String?, requestedExpiry: String?) throws {
            guard let loginHint, !loginHint.isEmpty else {
                throw UsageError("--ciba needs --login-hint HINT: who is signing in, in the form the server wants (glewlwyd: '{\"username\":\"NAME\"}')",
                                 command: "login")
            }
            if let message = bindingMessage {
                let length = message.unicodeScalars.count
                guard length > 0, length <= CIBALogin.bindingMessageLimit else {
                    throw UsageError("--binding-message must be 1 to \(CIBALogin.bindingMessageLimit) characters (it is shown on the user's device); "
                                     + "it has \(length) (each accent counts)", command: "login")
                }
                guard message.allSatisfy({ $0.unicodeScalars.filter(Self.isCombiningMark).count <= CIBALogin.combiningMarkLimit }) else {
                    throw UsageError("--binding-message must not stack more than \(CIBALogin.combiningMarkLimit) accents (combining marks) "
                                     + "on one character", command: "login")
                }
                guard TerminalText.oneLine(message) == message else {
                    throw UsageError("--binding-message must be plain text on one line, without control or invisible characters: "
                                     + TerminalText.oneLine(message), command: "login")
                }
            }
            var expiry: Int64?
            if let text = requestedExpiry {
                guard let seconds = Int64(text), (1...CIBALogin.requestedExpiryLimit).contains(seconds) else {
                    throw UsageError("--requested-expiry must be a whole number of seconds from 1 to \(CIBALogin.requestedExpiryLimit), not "
                                     + TerminalText.oneLine(text), command: "login")
                }
                expiry = seconds
            }
            self.loginHint = loginHint
            self.bindingMessage = bindingMessage
            self.requestedExpiry = expiry
        }

        static func isCombiningMark(_ scalar: Unicode.Scalar) -> Bool {
            [.nonspacingMark, .spacingMark, .enclosingMark].contains(scalar.properties.generalCategory)
        }
    }

    static func run(_ context: CommandContext, _ settings: SignInSettings, _ request: Request) throws {
        try PollingSignIn.run(context) { status in try signIn(context, settings, request, status: status) }
    }

    private static func signIn(_ context: CommandContext, _ settings: SignInSettings, _ request: Request, status: StatusLine) throws {
        let store = try context.deviceStore()
        let http = settings.http.client(context)
        let server = try settings.authorizationServer(http: http, context: context)
        let waiting = context.environment.waiting({ devtrust_interrupt_signal() })
        let signIn = CIBASignIn(
            polling: PolledSignIn(oauth: try settings.oauthClient(context, server: server, stoppedBySignals: true), clientID: settings.clientID, server: server,
                                  waiting: waiting),
            request: BackchannelAuthenticationRequest(scope: settings.scope, loginHint: request.loginHint, bindingMessage: request.bindingMessage,
                                                      requestedExpiry: request.requestedExpiry))
        devtrust_watch_interrupts()
        let tokens = try signIn.run(events: { event in
            status.clear()
            if case let .started(started, interval) = event {
                PollingSignIn.emit(context, ["event": .string("started"), "binding_message": started.bindingMessage.map { .string($0) } ?? .null,
                                             "expires_in": .integer(started.expiresIn), "interval": .integer(interval)])
                present(context, loginHint: request.loginHint, bindingMessage: started.bindingMessage)
            }
            PollingSignIn.report(context, event)
        }, tick: PollingSignIn.countdown(context, status: status, waiting: waiting))
        try PollingSignIn.finish(context, status: status, store: store, settings: settings, method: "ciba", tokens: tokens, server: server)
    }

    /// What the user does now, on stderr; the hint and message on lines of their own, made safe.
    static func present(_ context: CommandContext, loginHint: String, bindingMessage: String?) {
        guard !context.quiet else { return }
        var text = "\nA sign-in request went to the device of \(TerminalText.oneLine(loginHint)): approve it there.\n"
        if let bindingMessage {
            text += "Approve it only if it shows this message:\n\n    \(TerminalText.oneLine(bindingMessage))\n"
        }
        context.terminal.writeError(text + "\n")
    }
}
