import DevtrustHTTP
import DevtrustTerminal

// The terminal toolkit (DevtrustTerminal) as this run's options and environment set it up.

extension TerminalStyle {
    /// Colour on this run's stderr, as its terminal and variables allow.
    init(_ environment: CommandEnvironment) {
        self.init(errorIsTerminal: environment.terminal.errorIsTerminal, variables: environment.variables)
    }
}

extension StatusLine {
    /// Whether this run draws a status line (`isWanted(terminal:variables:quiet:json:)`).
    static func isWanted(_ context: CommandContext) -> Bool {
        isWanted(terminal: context.terminal, variables: context.environment.variables, quiet: context.quiet, json: context.json)
    }
}

extension NetworkWaitIndicator {
    /// The indicator for a command's requests. It draws nothing where it would not
    /// be seen or would get in the way (`StatusLine.isWanted`: no terminal, one that
    /// cannot rewrite a line, --quiet, --json), nor with DEVTRUST_HTTP_DEBUG, whose
    /// lines curl writes to stderr while the request is under way.
    static func make(_ context: CommandContext, httpDebug: Bool) -> NetworkWaitIndicator {
        NetworkWaitIndicator(statusLine: context.statusLine, glyphs: .forTerminal(context.environment.variables),
                             variables: context.environment.variables, isWanted: { !httpDebug && StatusLine.isWanted(context) })
    }
}

/// The network-wait indicator as curl's observer of a request's wait: the terminal toolkit
/// knows nothing of HTTP, and HTTP nothing of terminals.
struct NetworkWaitObserver: HTTPWaitObserver {
    let indicator: NetworkWaitIndicator

    func waiting(for host: String, elapsedSeconds: Double) {
        indicator.waiting(for: host, elapsedSeconds: elapsedSeconds)
    }

    func finished() {
        indicator.finished()
    }
}
