/// Entry point of the `devtrust` command: parse, dispatch, report.
public enum DevtrustCommandLine {
    public static func run(_ arguments: [String], environment: CommandEnvironment) -> Int32 {
        let parsed: ParsedArguments
        do {
            parsed = try CommandSpecs.parser.parse(arguments)
        } catch {
            return report(error, terminal: environment.terminal, verbose: false)
        }
        let context = CommandContext(arguments: parsed, environment: environment)
        defer {
            for notice in context.tpmNotices.drain() { context.warn(notice) }
        }
        do {
            try dispatch(context)
            return ExitCode.success.rawValue
        } catch {
            return report(error, terminal: environment.terminal, verbose: parsed.has("verbose"))
        }
    }

    private static func dispatch(_ context: CommandContext) throws {
        let arguments = context.arguments
        if arguments.has("version") {
            context.output("devtrust \(CommandSpecs.version)")
            return
        }
        if arguments.has("help") || arguments.command == "help" {
            let topic = arguments.command == "help" ? arguments.positionals.first : arguments.command
            if let topic {
                guard let text = CommandSpecs.help(for: topic) else { throw UsageError("no command \"\(topic)\"; run `devtrust --help`") }
                context.output(text)
            } else {
                context.output(CommandSpecs.overview())
            }
            return
        }
        switch arguments.command {
        case "init": try InitCommand.run(context)
        case "pubkey": try PubkeyCommand.run(context)
        case "sign-challenge": try SignChallengeCommand.run(context)
        case "device-data": try TokenCommands.runDeviceData(context)
        case "token": try TokenCommands.runToken(context)
        case "verify": try VerifyCommand.run(context)
        case "attributes": try AttributesCommand.run(context)
        case "register": try RegisterCommand.run(context)
        case "login": try LoginCommand.run(context)
        case "access-token": try AccessTokenCommand.run(context)
        case "authorize-url": try AuthorizeURLCommand.run(context)
        case "logout": try LogoutCommand.run(context)
        case "status": try StatusCommand.run(context)
        case "reset": try ResetCommand.run(context)
        default: throw UsageError("no command given; run `devtrust --help` for the list")
        }
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
