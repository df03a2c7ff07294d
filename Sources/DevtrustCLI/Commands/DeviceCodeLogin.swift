import CProcessHardening
import DevtrustEncoding
import DevtrustHTTP
import DevtrustSignIn
import DevtrustTerminal
import Glibc

/// `login --device-code`: RFC 8628 on a device without a browser. On stderr:
/// the user code and the verification URI, a QR code, the code in large type,
/// a countdown, as the terminal's window leaves room (DeviceCodeScreen).
/// With --json, one JSON object per status on stdout (PollingSignIn); none ever
/// carries the device code or a token.
/// One of `login`'s modes, which LoginCommand chooses: not a command of its own.
enum DeviceCodeLogin {
    /// `drawQR`: false with `--no-qr`.
    static func run(_ context: CommandContext, _ settings: SignInSettings, drawQR: Bool) throws {
        try PollingSignIn.run(context) { status in try signIn(context, settings, drawQR: drawQR, status: status) }
    }

    private static func signIn(_ context: CommandContext, _ settings: SignInSettings, drawQR: Bool, status: StatusLine) throws {
        let store = try context.deviceStore()
        let http = settings.http.client(context)
        let server = try settings.authorizationServer(http: http, context: context)
        let waiting = context.environment.waiting({ devtrust_interrupt_signal() })
        let signIn = DeviceCodeSignIn(oauth: try settings.oauthClient(context, server: server, stoppedBySignals: true), clientID: settings.clientID, scope: settings.scope,
                                      server: server, waiting: waiting)
        devtrust_watch_interrupts()
        let showQR = drawQR && context.terminal.errorIsTerminal
        let tokens = try signIn.run(events: { event in
            status.clear()
            if case let .started(authorization, interval) = event {
                PollingSignIn.emit(context, ["event": .string("started"), "user_code": .string(authorization.userCode),
                                             "verification_uri": .string(authorization.verificationURI),
                                             "verification_uri_complete": authorization.verificationURIComplete.map { .string($0) } ?? .null,
                                             "expires_in": .integer(authorization.expiresIn), "interval": .integer(interval)])
                present(context, authorization, qr: showQR)
            }
            PollingSignIn.report(context, event)
        }, tick: PollingSignIn.countdown(context, status: status, waiting: waiting))
        try PollingSignIn.finish(context, status: status, store: store, settings: settings, method: "device-code", tokens: tokens, server: server)
    }

    /// On a terminal, the screen laid out for its window (DeviceCodeScreen), the user code
    /// in bold and the QR code in black on white unless NO_COLOR; elsewhere (a log, a pipe)
    /// plain lines, without big letters. Either way the server's text is made safe by
    /// DeviceCodeScreen.Content.
    static func present(_ context: CommandContext, _ authorization: DeviceAuthorization, qr: Bool) {
        guard !context.quiet else { return }
        let terminal = context.terminal
        var qrCode: [DeviceCodeScreen.Line]?
        if qr, let uri = authorization.verificationURIComplete {
            switch QRCode.render(uri) {
            case .success(let lines): qrCode = lines
            case .failure(let problem): context.detail("no QR code: " + problem.message)
            }
        }
        let content = DeviceCodeScreen.Content(userCode: authorization.userCode, verificationURI: authorization.verificationURI,
                                               verificationURIComplete: authorization.verificationURIComplete, qrCode: qrCode)
        guard terminal.errorIsTerminal else {
            terminal.writeError("\nTo sign in, open \(content.verificationURI) on another device and enter the code:\n\n")
            terminal.writeError("\n    \(content.userCode)\n\n")
            if let complete = content.verificationURIComplete { terminal.writeError("or open \(complete)\n") }
            terminal.writeError("\n")
            return
        }
        let screen = DeviceCodeScreen(content, size: DeviceCodeScreen.size(of: terminal, variables: context.environment.variables))
        let styled = context.style.usesColour
        for line in screen.lines { terminal.writeError((styled ? line.styled : line.text) + "\n") }
    }
}
