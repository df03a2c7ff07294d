import CProcessHardening
import DevtrustEncoding
import DevtrustDevice
import DevtrustErrors
import DevtrustHTTP
import DevtrustKeystore
import DevtrustSignIn
import DevtrustSignInService
import DevtrustTerminal

/// What `login --device-code` and `login --ciba` share: both poll the token
/// endpoint while the user approves elsewhere, show a countdown on stderr, and
/// with --json print one JSON object per status on stdout (`started`, then
/// `polling` before each poll, then `success` or `failure`); none ever carries
/// a device code, an auth_req_id or a token.
enum PollingSignIn {
    /// With --json, every run that got this far ends with exactly one final
    /// event: `success`, or `failure` with `error` and `description`, whatever
    /// went wrong (an expired or denied request says `expired` or `access_denied`
    /// first, then `failure`).
    static func run(_ context: CommandContext, _ signIn: (StatusLine) throws -> Void) throws {
        // The countdown owns the status line while it shows: a poll that waits does not draw the network-wait indicator over it.
        let status = context.statusLine
        do {
            try signIn(status)
        } catch {
            status.clear()
            let report = ErrorReport.from(error)
            switch report.category {
            case .approvalExpired: emit(context, ["event": .string("expired")])
            case .approvalDenied: emit(context, ["event": .string("access_denied")])
            default: break
            }
            emit(context, failureEvent(report))
            if case let .interrupted(signal) = report.category { endBySignal(context, signal, report.message) }
            throw error
        }
    }

    /// What every event after `started` says: a `polling` event, and on stderr the interval (-v), a slow-down (-v) or a network error.
    static func report<Started>(_ context: CommandContext, _ event: PollingSignInEvent<Started>) {
        switch event {
        case .started:
            break
        case let .polling(count, interval, wait, nextPollAt):
            emit(context, ["event": .string("polling"), "poll_count": .integer(count), "interval": .integer(interval),
                           "next_poll_at": .string(Timestamp.format(secondsSinceEpoch: Int64(nextPollAt.rounded(.up))))])
            context.detail("poll \(count) in \(wait) s")
        case let .slowDown(newInterval):
            context.detail("the server asked to slow down: polling every \(newInterval) s from now on")
        case let .networkError(message, retryIn):
            // The server's words (an error_description, a page) on one line: a line break in them must not start a line of devtrust's own.
            context.warn(TerminalText.oneLine(message) + "; trying again in \(retryIn) s")
        }
    }

    /// The countdown on the status line, about once a second, where one is wanted.
    static func countdown(_ context: CommandContext, status: StatusLine, waiting: any Waiting) -> (Double, Double) -> Void {
        let countdown = StatusLine.isWanted(context)
        return { now, deadline in
            guard countdown else { return }
            let size = DeviceCodeScreen.size(of: context.terminal, variables: context.environment.variables)
            // While the poll that follows waits for its answer, the network-wait indicator redraws the
            // countdown with the seconds waited: the time left keeps counting down.
            status.show(DeviceCodeScreen.countdown(secondsLeft: Int(deadline - now), columns: size?.columns), as: .countdown,
                        whileWaiting: { waited in
                            DeviceCodeScreen.countdown(secondsLeft: Int(deadline - waiting.now()), columns: size?.columns, serverWait: waited)
                        })
        }
    }

    /// Stores the tokens, then says `success`: a keystore that refuses the tokens makes the run a failure.
    static func finish(_ context: CommandContext, status: StatusLine, store: DeviceStore, settings: SignInSettings, method: String,
                       tokens: TokenSet, server: AuthorizationServer) throws {
        status.clear()
        try settings.save(context, store: store, method: method, tokens: tokens,
                          issuer: settings.discovery != nil ? SignInTarget.recordableIssuer(server.issuer) : nil)
        let now = context.environment.clock.secondsSinceEpoch()
        emit(context, ["event": .string("success"), "token_type": .string(tokens.tokenType),
                       "expires_in": tokens.expiryAssumed ? .null : tokens.expiresAt.map { .integer($0 - now) } ?? .null,
                       "scope": tokens.scope.map { .string($0) } ?? .null])
    }

    /// The final event of a run that failed: the OAuth error code when the
    /// server refused with one, else what kind of failure it was; and what happened.
    static func failureEvent(_ error: any Error) -> JSONObject {
        failureEvent(ErrorReport.from(error))
    }

    static func failureEvent(_ report: ErrorReport) -> JSONObject {
        var description = report.message
        let code: String
        switch report.category {
        case .usage, .configuration: code = "usage_error"
        case .noDeviceKey, .notRegistered: code = "not_registered"
        case .notPermitted: code = "not_permitted"
        case .serverRefused: code = "server_refused"
        case let .oauthError(error, serverDescription):
            // The server's own code and description, as it sent them.
            code = error
            description = serverDescription ?? report.message
        case .approvalExpired: code = "expired_token"
        case .approvalDenied: code = "access_denied"
        case .unsupported: code = "unsupported"
        case .network: code = "network_error"
        case .protocolViolation: code = "protocol_error"
        case .tpm: code = "tpm_error"
        case .keystore: code = "keystore_error"
        case .interrupted: code = "interrupted"
        case .failure: code = "error"
        }
        return ["event": .string("failure"), "error": .string(code), "description": .string(description)]
    }

    /// A wait ended by a signal, once its final event is out: said on stderr, then the
    /// process ends by that same signal, as the shell expects. Does not return.
    static func endBySignal(_ context: CommandContext, _ signal: Int32, _ description: String) {
        context.warn(description)
        devtrust_reraise(signal)
    }

    static func emit(_ context: CommandContext, _ event: JSONObject) {
        if context.json { context.output(JSONWriter.string(.object(event))) }
    }
}
