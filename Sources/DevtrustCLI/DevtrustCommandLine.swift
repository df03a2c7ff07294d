/// Entry point of the `devtrust` command: parse, dispatch, report.
public enum DevtrustCommandLine {
    public static func run(_ arguments: [String], environment: CommandEnvironment) -> Int32 {
        let parsed: ParsedArguments
        do {
            parsed = try CommandSpecs.parser.parse(arguments)
        } catch {
            return report(error, terminal: environment.terminal, verbose: false)
        }
        // Bare `devtrust` shows the commands, on stderr as a usage error, as the CLI
        // contract says: no artifact was asked for, and a script that ran it
        // by mistake should not carry on as if something had been done.
        if arguments.isEmpty {
            environment.terminal.writeError(CommandSpecs.overview())
            return ExitCode.usage.rawValue
        }
        let context = CommandContext(global: GlobalOptions(OptionValues(parsed)), environment: environment)
        defer {
            for notice in context.tpmNotices.drain() { context.warn(notice) }
        }
        do {
            try dispatch(context, parsed)
            return ExitCode.success.rawValue
        } catch {
            return report(error, terminal: environment.terminal, verbose: context.verbose)
        }
    }

    private static func dispatch(_ context: CommandContext, _ parsed: ParsedArguments) throws {
        if context.global.version {
            context.output("devtrust \(CommandSpecs.version)")
            return
        }
        if context.global.help && parsed.command != HelpCommand.spec.name {
            return try HelpCommand.run(context, HelpCommand.Options(topic: parsed.command))
        }
        guard let name = parsed.command, let command = CommandSpecs.command(named: name) else {
            throw UsageError("no command given; run `devtrust --help` for the list")
        }
        try command.run(context, parsed: parsed)
    }

    private static func report(_ error: any Error, terminal: any Terminal, verbose: Bool) -> Int32 {
        let report = ErrorReport.from(error)
        terminal.writeError("devtrust: error: \(TerminalText.printable(report.message))\n")
        if verbose, let detail = report.detail, !detail.isEmpty {
            terminal.writeError("devtrust: detail: \(TerminalText.printable(detail))\n")
        }
        return report.exitCode.rawValue
    }
}
