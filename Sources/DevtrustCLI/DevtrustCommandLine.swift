import DevtrustBrowser
import DevtrustEncoding
import DevtrustErrors
import DevtrustTerminal

/// Entry point of the `devtrust` command: parse, dispatch, report.
public enum DevtrustCommandLine {
    public static func run(_ arguments: [String], environment: CommandEnvironment) -> Int32 {
        // A host manifest names the devtrust binary itself (`browser install`): the browser runs it
        // with its own arguments, which then mean `native-host` (after `--`: an ID may start with "-").
        let arguments = NativeHostCaller.isBrowserLaunch(arguments) ? [NativeHostCommand.spec.name, "--"] + arguments : arguments
        if let refused = NativeHostCaller.refusedFirefoxLaunch(arguments) {
            return report(refused, terminal: environment.terminal, style: TerminalStyle(environment), verbose: false, json: false)
        }
        let parsed: ParsedArguments
        do {
            parsed = try CommandSpecs.parser.parse(arguments)
        } catch {
            return report(error, terminal: environment.terminal, style: TerminalStyle(environment), verbose: false,
                          json: CommandSpecs.parser.asksForJSON(arguments))
        }
        // Bare `devtrust` shows the commands, on stderr as a usage error, as the CLI
        // contract says: no artifact was asked for, and a script that ran it
        // by mistake should not carry on as if something had been done.
        if arguments.isEmpty {
            environment.terminal.writeError(CommandSpecs.overview())
            return ExitCode.usage.rawValue
        }
        let context = CommandContext(global: GlobalOptions(OptionValues(parsed)), environment: environment)
        do {
            try dispatch(context, parsed)
        } catch {
            // Under --json the error object is the last line of stderr, for a script to find.
            if context.json { warnTPMNotices(context) }
            let status = report(error, terminal: environment.terminal, style: context.style, verbose: context.verbose, json: context.json)
            warnTPMNotices(context)
            return status
        }
        warnTPMNotices(context)
        return ExitCode.success.rawValue
    }

    /// What the TPM backend did on its own during the command, said after it.
    private static func warnTPMNotices(_ context: CommandContext) {
        for notice in context.tpmNotices.drain() { context.warn(notice) }
    }

    private static func dispatch(_ context: CommandContext, _ parsed: ParsedArguments) throws {
        if context.global.version {
            context.output(context.json ? JSONWriter.string(.object(["version": .string(CommandSpecs.version)])) : "devtrust \(CommandSpecs.version)")
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

    /// The error on stderr: a line for people (what failed in red on a terminal, the hint
    /// after it plain), or with --json one JSON object on one line, never coloured.
    private static func report(_ error: any Error, terminal: any Terminal, style: TerminalStyle, verbose: Bool, json: Bool) -> Int32 {
        let report = ErrorReport.from(error)
        terminal.writeError(report.text(style: style, verbose: verbose, json: json))
        return report.exitCode.rawValue
    }
}
