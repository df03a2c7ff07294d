import CProcessHardening
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustSignIn
import DevtrustSignInService
import DevtrustTerminal
import Glibc

/// `login --browser`: a redirect sign-in through a loopback listener (RFC 8252
/// section 7.3), as `gh auth login --web` and `gcloud auth login` do. devtrust
/// listens on 127.0.0.1 (a port the system chooses, or the redirect URI's),
/// opens the authorization URL (device token, PKCE, state) with xdg-open or
/// prints it (`--no-browser`), waits for the browser to come back with this
/// sign-in's state, serves a fixed "you can close this tab" page, exchanges the
/// code with the PKCE verifier (kept in memory only) and closes the listener.
/// One of `login`'s modes, which LoginCommand chooses: not a command of its own.
enum BrowserLogin {
    /// An OS-chosen port on the IPv4 loopback literal (RFC 8252 section 8.3: not `localhost`).
    static let defaultRedirectURI = "http://127.0.0.1/callback"
    /// The wait, by default: the device token's life.
    static let defaultTimeout = Int(DeviceTokenMinter.acceptedForSeconds)

    /// `timeout`: `--timeout`'s text; `noBrowser`: `--no-browser`.
    static func run(_ context: CommandContext, _ settings: SignInSettings, timeout timeoutText: String?, noBrowser: Bool) throws {
        let redirectText = settings.explicitRedirectURI ?? defaultRedirectURI
        guard let redirect = LoopbackRedirect(redirectText) else {
            throw UsageError("login --browser needs a loopback redirect URI, http://127.0.0.1[:PORT]/PATH (RFC 8252), not \(redirectText); "
                             + "for another redirect URI use `devtrust authorize-url` and `devtrust login --callback URL`", command: "login")
        }
        let timeout = try timeoutSeconds(timeoutText)
        let store = try context.deviceStore()
        let server = try settings.authorizationServer(http: settings.http.client(context), context: context)
        // Before the browser opens: a DPoP key that cannot be used fails the run before the user signs in.
        let oauth = try settings.oauthClient(context, server: server)
        let listener = try LoopbackRedirectListener(redirect)
        defer { listener.close() }
        let request = try BrowserAuthorizationRequest.make(
            target: settings.target, server: server, redirectURI: listener.redirectURI, random: context.environment.random,
            deviceToken: { try settings.deviceToken(context, store: store, provider: server, destinations: $0) },
            pushingClient: { settings.http.oauthClient(context) }, warn: { context.warn($0) })
        let deadline = LoopbackRedirectListener.now() + Int64(timeout) * 1000
        PollingSignIn.emit(context, [
            "event": .string("started"), "authorization_url": .string(request.url), "redirect_uri": .string(listener.redirectURI),
            "url_expires_in": request.openWithinSeconds.map { .integer($0) } ?? .null, "timeout": .integer(Int64(timeout)),
        ])

        var launcher: pid_t?
        let elsewhere = "open it in a browser on this machine (over SSH, forward the port first: ssh -L \(listener.port):127.0.0.1:\(listener.port) HOST)"
        if noBrowser {
            showURL(context, request.url, lead: "Open this URL in a browser on this machine:", always: true)
            context.info("(\(elsewhere))")
        } else {
            showURL(context, request.url, lead: "Opening the sign-in page in your browser; if it does not open, open this URL:", always: false)
            // The browser starts on the listener's handoff page, which sends it on: the URL itself
            // (state, PKCE challenge, device token) never goes on a command line other users can read.
            launcher = TerminalFlowInteraction.launchBrowser(handingOff: request.url, through: listener, context: context,
                                                             noDesktop: "(no desktop session here: \(elsewhere))")
            if launcher == nil && context.quiet && !context.json { context.terminal.writeError(TerminalText.printable(request.url) + "\n") }
        }
        if let within = request.openWithinText { context.info("Open it \(within).") }
        context.info("Waiting up to \(BrowserAuthorizationRequest.duration(Int64(timeout))) for the browser to come back to \(listener.redirectURI) ...")

        var warned = Set<String>()
        let callback: LoopbackCallback
        devtrust_watch_interrupts()
        do {
            callback = try listener.waitForCallback(state: request.state, deadline: deadline, timeoutSeconds: timeout, tick: {
                reap(&launcher, context: context, url: request.url, listener: listener)
            }, interruption: { devtrust_interrupt_signal() }, ignored: { reason in
                let text: String
                switch reason {
                case .wrongState: text = "ignored a request to \(listener.redirectURI) with a wrong or missing state (not this sign-in's answer); still waiting"
                case .incomplete: text = "ignored a request to \(listener.redirectURI) with neither a code nor an error; still waiting"
                case let .otherUser(uid):
                    text = "refused a connection to the listener on port \(listener.port) from another user of this machine (uid \(uid)): "
                        + "it was told this sign-in is not theirs; still waiting for your browser"
                case .unknownOwner:
                    text = "refused a connection to the listener on port \(listener.port) whose owner the system could not name "
                        + "(it closed at once, or NETLINK_SOCK_DIAG and /proc/net/tcp are not readable here); still waiting for your browser "
                        + "(if your own browser's answer is refused so, sign in with `devtrust login --device-code` instead)"
                default:
                    context.detail("answered a stray request to the listener (\(reason)); still waiting")
                    return
                }
                if warned.insert(text).inserted { context.warn(text) } else { context.detail(text) }
            }, handedOff: {
                context.detail("the browser opened \(listener.handoffURL ?? listener.redirectURI) and was sent on to the sign-in page")
            })
        } catch {
            // Ended by a signal: said, then ended by that signal, as the shell expects.
            if let signal = Self.interruptingSignal(error) {
                PollingSignIn.emit(context, PollingSignIn.failureEvent(error))
                listener.close()
                PollingSignIn.endBySignal(context, signal, error.description)
            }
            if case .handoffReused = error {
                // A failure whose own code scripts can tell apart (docs/sign-in.md): the sign-in may have been taken over.
                PollingSignIn.emit(context, ["event": .string("failure"), "error": .string("handoff_reused"), "description": .string(error.description)])
                throw error
            }
            PollingSignIn.emit(context, ["event": .string("timeout")])
            throw error
        }

        switch callback.outcome {
        case let .error(error, description):
            listener.finish(callback, page: .notSignedIn)
            // The server's words on one line: a line break in them must not start a line of devtrust's own.
            func oneLine(_ text: String, _ limit: Int) -> String { String(text.prefix(limit).map { $0.isNewline ? " " : $0 }) }
            let shortError = oneLine(error, 100), shortDescription = description.map { oneLine($0, 500) }
            PollingSignIn.emit(context, error == "access_denied"
                ? ["event": .string("access_denied"), "description": shortDescription.map { .string($0) } ?? .null]
                : ["event": .string("failure"), "error": .string(shortError), "description": shortDescription.map { .string($0) } ?? .null])
            throw OAuthError(error: shortError, errorDescription: shortDescription, httpStatus: 0)
        case let .code(code):
            do {
                let tokens = try oauth.exchangeCode(code, verifier: request.pkce.verifier, redirectURI: listener.redirectURI,
                                                                      clientID: settings.clientID, server: server, nonce: request.nonce)
                try settings.save(context, store: store, method: "browser", tokens: tokens)
                listener.finish(callback, page: .signedIn)
                let now = context.environment.clock.secondsSinceEpoch()
                PollingSignIn.emit(context, ["event": .string("success"), "token_type": .string(tokens.tokenType),
                                                 "expires_in": tokens.expiryAssumed ? .null : tokens.expiresAt.map { .integer($0 - now) } ?? .null,
                                                 "scope": tokens.scope.map { .string($0) } ?? .null])
            } catch {
                listener.finish(callback, page: .notSignedIn)
                PollingSignIn.emit(context, PollingSignIn.failureEvent(error))
                throw error
            }
        }
    }

    static func interruptingSignal(_ error: LoopbackListenerError) -> Int32? {
        guard case let .interrupted(signal) = error else { return nil }
        return signal
    }

    static func timeoutSeconds(_ text: String?) throws -> Int {
        guard let text else { return defaultTimeout }
        guard let seconds = Int(text), (1...86_400).contains(seconds) else {
            throw UsageError("--timeout takes a number of seconds from 1 to 86400, not \"\(text)\"", command: "login")
        }
        return seconds
    }

    /// The URL on stderr; `always`: even with --quiet (without it, --no-browser is no use).
    static func showURL(_ context: CommandContext, _ url: String, lead: String, always: Bool) {
        if context.quiet {
            if always && !context.json { context.terminal.writeError(TerminalText.printable(url) + "\n") }
            return
        }
        context.info("\(lead)\n\n    \(url)\n")
    }

    /// Reaps xdg-open once it ends; says so when it failed (it may also run as long as the browser),
    /// and then the handoff page sends nobody on: no browser of devtrust's is coming for it.
    static func reap(_ launcher: inout pid_t?, context: CommandContext, url: String, listener: LoopbackRedirectListener) {
        guard let pid = launcher else { return }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped != 0 else { return }
        launcher = nil
        guard reaped == pid else { return }
        let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        if code != 0 {
            listener.withdraw()
            context.warn("xdg-open could not open a browser (exit \(code)); open the URL in a browser on this machine")
            if context.quiet && !context.json { context.terminal.writeError(TerminalText.printable(url) + "\n") }
        }
    }
}
