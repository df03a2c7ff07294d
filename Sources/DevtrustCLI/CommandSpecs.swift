import DevtrustErrors

/// The options every command accepts (before or after the command).
struct GlobalOptions: OptionOwner {
    static let keystore = ValueOption<Self>("keystore", "DIR", .directory,
                                            "keystore directory (env DEVTRUST_KEYSTORE; default ~/.local/share/devtrust, /var/lib/devtrust for root)")
    static let agent = ValueOption<Self>("agent", "PATH", .file,
                                         "the system agent's socket (env DEVTRUST_AGENT; default /run/devtrust/agent.sock when it exists and no keystore is named)")
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
        let options: [any DeclaredOption] = [keystore, agent, config, tcti, caFile, json, verbose, quiet, help, version]
        return options.map(\.spec)
    }()

    var keystore: String?
    var agent: String?
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
        agent = values[Self.agent]
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

    /// Every command by its name, in the order help lists them. A command line
    /// finds its command by the name and builds that command's spec alone:
    /// every command's spec (the options' types made at run time, command by
    /// command) was a quarter of a token's instructions. Each name is its
    /// spec's (CommandSpecTests).
    static let named: [(name: String, command: any DevtrustCommand.Type)] = [
        ("init", InitCommand.self), ("pubkey", PubkeyCommand.self), ("sign-challenge", SignChallengeCommand.self),
        ("device-data", DeviceDataCommand.self), ("token", TokenCommand.self), ("attributes", AttributesCommand.self),
        ("verify", VerifyCommand.self), ("register", RegisterCommand.self), ("login", LoginCommand.self),
        ("access-token", AccessTokenCommand.self), ("dpop-proof", DPoPProofCommand.self), ("authorize-url", AuthorizeURLCommand.self),
        ("logout", LogoutCommand.self), ("status", StatusCommand.self), ("doctor", DoctorCommand.self), ("reset", ResetCommand.self),
        ("browser", BrowserCommand.self), ("native-host", NativeHostCommand.self), ("agent", AgentCommand.self), ("completion", CompletionCommand.self),
        ("help", HelpCommand.self),
    ]

    /// Every command, in the order help lists them.
    static var all: [any DevtrustCommand.Type] { named.map(\.command) }

    static let global = GlobalOptions.declaredOptions
    /// Every command's spec (help, completion): the parser does not need them all.
    static let commands = all.map { $0.spec }

    static var parser: ArgumentParser {
        ArgumentParser(globalOptions: global, commandNames: named.map(\.name)) { name in command(named: name)?.spec }
    }

    static func command(named name: String) -> (any DevtrustCommand.Type)? {
        named.first { $0.name == name }?.command
    }

    /// Help fits an 80-column terminal.
    static let helpWidth = 80

    static func overview() -> String {
        var text = wrap("devtrust \(version): a device-trust agent. Keeps a P-256 device key (TPM or software), "
                        + "registers the device with an identity server, and mints device tokens.")
        text += """

        Usage: devtrust [OPTIONS] COMMAND [ARGS]

        Commands:

        """
        let width = commands.map(\.name.count).max() ?? 0
        for command in commands {
            text += columns("  " + command.name, command.summary, column: width + 4)
        }
        text += "\nOptions (before or after the command):\n" + describe(global)
        let codes = ExitCode.allCases.map { "\($0.rawValue) \($0.shortMeaning)" }.joined(separator: ", ")
        text += "\n" + wrap("Exit codes: " + codes + ". `devtrust help COMMAND` shows a command's options; man devtrust.")
        return text
    }

    static func help(for name: String) -> String? {
        guard let command = commands.first(where: { $0.name == name }) else { return nil }
        var words = [String]()
        for requirement in command.requirements {
            let alternatives = requirement.alternatives.map { longs in
                longs.compactMap { long in command.options.first { $0.long == long }.map(shown) }.joined(separator: " ")
            }
            words.append(alternatives.count == 1 ? alternatives[0] : "(" + alternatives.joined(separator: " | ") + ")")
        }
        for option in command.options where !command.isRequired(option) {
            words.append("[" + shown(option) + "]" + (option.repeatable ? "..." : ""))
        }
        if !command.positionalUsage.isEmpty { words.append(command.positionalUsage) }
        var text = wrap(words, first: "Usage: devtrust \(command.name)", rest: "    ")
        text += "\n" + wrap(command.summary)
        if !command.options.isEmpty { text += "\nOptions:\n" + describe(command.options) }
        return text
    }

    /// `--name VALUE`, as usage lines show an option.
    static func shown(_ option: OptionSpec) -> String {
        option.displayName + (option.value.map { " " + $0.name } ?? "")
    }

    private static func describe(_ options: [OptionSpec]) -> String {
        let rendered = options.map { option -> (String, String) in
            ("  " + (option.short.map { "-\($0), " } ?? "") + shown(option), option.help)
        }
        let width = rendered.map(\.0.count).max() ?? 0
        return rendered.map { columns($0.0, $0.1, column: width + 2) }.joined()
    }

    /// `left` padded to `column`, then `right` wrapped to the help width with
    /// its continuation lines indented to the column.
    private static func columns(_ left: String, _ right: String, column: Int) -> String {
        let lead = left + String(repeating: " ", count: column - left.count)
        return wrap(right.split(separator: " ").map(String.init), first: String(lead.dropLast()), rest: String(repeating: " ", count: column))
    }

    private static func wrap(_ paragraph: String) -> String {
        let words = paragraph.split(separator: " ").map(String.init)
        return wrap(Array(words.dropFirst()), first: words.first ?? "", rest: "")
    }

    /// `first` then the words, a space between, lines broken before a word that
    /// would pass the help width; each later line starts with `rest`.
    private static func wrap(_ words: [String], first: String, rest: String) -> String {
        var lines = [first]
        for word in words {
            if lines[lines.count - 1].count + 1 + word.count > helpWidth && lines[lines.count - 1].count > rest.count {
                lines.append(rest + word)
            } else {
                lines[lines.count - 1] += (lines[lines.count - 1].isEmpty ? "" : " ") + word
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// `help [COMMAND]` (and `--help`): the overview, or one command's options.
enum HelpCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "help", summary: "show help for a command", positionalUsage: "[COMMAND]", maximumPositionals: 1,
                                      positionalKind: .command, options: [])
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
            guard let text = CommandSpecs.help(for: topic) else {
                let suggestions = NameSuggestions.closest(to: topic, among: CommandSpecs.commands.map(\.name))
                throw UsageError("no command \"\(topic)\"" + (suggestions.isEmpty ? "; run `devtrust --help`" : NameSuggestions.phrase(suggestions, quoted: true)))
            }
            context.output(text)
        } else {
            context.output(CommandSpecs.overview())
        }
    }
}
