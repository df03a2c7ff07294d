/// The options every command accepts (before or after the command).
struct GlobalOptions: OptionOwner {
    static let keystore = ValueOption<Self>("keystore", "DIR", .directory,
                                            "keystore directory (env DEVTRUST_KEYSTORE; default ~/.local/share/devtrust, /var/lib/devtrust for root)")
    static let config = ValueOption<Self>("config", "FILE", .file,
                                          "configuration file (env DEVTRUST_CONFIG; default ~/.config/devtrust/config.json, then /etc/devtrust/config.json)")
    static let tcti = ValueOption<Self>("tcti", "CONF", .text,
                                        "TPM connection (env DEVTRUST_TCTI, TPM2TOOLS_TCTI, TSS2_TCTI; default device:/dev/tpmrm0, then tabrmd)")
    static let caFile = ValueOption<Self>("ca-file", "FILE", .file, "trust this CA for HTTPS (env DEVTRUST_CA_FILE; default the system trust store)")
    static let json = FlagOption<Self>("json", "print one JSON document on stdout instead of text")
    static let verbose = FlagOption<Self>("verbose", short: "v", "say more on stderr")
    static let quiet = FlagOption<Self>("quiet", short: "q", "say nothing on stderr but errors")
    static let help = FlagOption<Self>("help", short: "h", "show help")
    static let version = FlagOption<Self>("version", "show the version")

    static let declaredOptions: [OptionSpec] = {
        let options: [any DeclaredOption] = [keystore, config, tcti, caFile, json, verbose, quiet, help, version]
        return options.map(\.spec)
    }()

    var keystore: String?
    var config: String?
    var tcti: String?
    var caFile: String?
    var json: Bool
    var verbose: Bool
    var quiet: Bool
    var help: Bool
    var version: Bool

    init(_ values: OptionValues<Self>) {
        keystore = values[Self.keystore]
        config = values[Self.config]
        tcti = values[Self.tcti]
        caFile = values[Self.caFile]
        json = values[Self.json]
        verbose = values[Self.verbose]
        quiet = values[Self.quiet]
        help = values[Self.help]
        version = values[Self.version]
    }
}

/// A command: its options (and with them its spec), and what it does with them.
protocol DevtrustCommand: SendableMetatype {
    associatedtype Options: CommandOptions
    static func run(_ context: CommandContext, _ options: Options) throws
}

extension DevtrustCommand {
    static var spec: CommandSpec { Options.spec }

    /// Reads the command's options from `parsed` and runs it.
    static func run(_ context: CommandContext, parsed: ParsedArguments) throws {
        try run(context, Options(OptionValues(parsed)))
    }
}

enum CommandSpecs {
    static let version = "0.1.0"

    /// Every command, in the order help lists them.
    static let all: [any DevtrustCommand.Type] = [
        InitCommand.self, PubkeyCommand.self, SignChallengeCommand.self, DeviceDataCommand.self, TokenCommand.self,
        AttributesCommand.self, VerifyCommand.self, RegisterCommand.self, LoginCommand.self, AccessTokenCommand.self,
        AuthorizeURLCommand.self, LogoutCommand.self, StatusCommand.self, ResetCommand.self, HelpCommand.self,
    ]

    static let global = GlobalOptions.declaredOptions
    static let commands = all.map { $0.spec }

    static var parser: ArgumentParser { ArgumentParser(globalOptions: global, commands: commands) }

    static func command(named name: String) -> (any DevtrustCommand.Type)? {
        all.first { $0.spec.name == name }
    }

    static func overview() -> String {
        var text = """
        devtrust \(version): a device-trust agent. Keeps a P-256 device key (TPM or software),
        registers the device with an identity server, and mints device tokens.

        Usage: devtrust [OPTIONS] COMMAND [ARGS]

        Commands:

        """
        let width = commands.map(\.name.count).max() ?? 0
        for command in commands {
            text += "  " + command.name + String(repeating: " ", count: width - command.name.count + 2) + command.summary + "\n"
        }
        text += "\nOptions (before or after the command):\n" + describe(global)
        text += "\nExit codes: 0 ok, 1 failure/invalid, 2 usage, 3 no key or not registered, 4 server refused,\n"
        text += "5 network, 6 TPM, 7 keystore. `devtrust help COMMAND` shows a command's options; man devtrust.\n"
        return text
    }

    static func help(for name: String) -> String? {
        guard let command = commands.first(where: { $0.name == name }) else { return nil }
        var usage = "Usage: devtrust \(command.name)"
        for option in command.options {
            let shown = option.displayName + (option.value.map { " " + $0.name } ?? "")
            usage += " [" + shown + "]" + (option.repeatable ? "..." : "")
        }
        if !command.positionalUsage.isEmpty { usage += " " + command.positionalUsage }
        var text = usage + "\n\n" + command.summary + "\n"
        if !command.options.isEmpty { text += "\nOptions:\n" + describe(command.options) }
        return text
    }

    private static func describe(_ options: [OptionSpec]) -> String {
        let rendered = options.map { option -> (String, String) in
            let short = option.short.map { "-\($0), " } ?? ""
            return (short + option.displayName + (option.value.map { " " + $0.name } ?? ""), option.help)
        }
        let width = rendered.map(\.0.count).max() ?? 0
        return rendered.map { "  " + $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 + "\n" }.joined()
    }
}

/// `help [COMMAND]` (and `--help`): the overview, or one command's options.
enum HelpCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "help", summary: "show help for a command", positionalUsage: "[COMMAND]", maximumPositionals: 1,
                                      options: [])
        var topic: String?

        init(_ values: OptionValues<Self>) {
            topic = values.positionals.first
        }

        init(topic: String?) {
            self.topic = topic
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        if let topic = options.topic {
            guard let text = CommandSpecs.help(for: topic) else { throw UsageError("no command \"\(topic)\"; run `devtrust --help`") }
            context.output(text)
        } else {
            context.output(CommandSpecs.overview())
        }
    }
}
