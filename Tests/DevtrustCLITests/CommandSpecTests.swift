@testable import DevtrustCLI
import DevtrustErrors
import Foundation
import Testing

/// Every command's spec, walked: what help shows, what the parser accepts and
/// what the command reads are one and the same list of options.
@Suite struct CommandSpecTests {
    @Test func everySpecIsWellFormedAndShownInHelp() throws {
        let globalLongs = CommandSpecs.global.map(\.long)
        #expect(Set(globalLongs).count == globalLongs.count, "global: \(globalLongs)")
        let overview = CommandSpecs.overview()
        for option in CommandSpecs.global {
            checkWellFormed(option, in: "global options")
            #expect(overview.contains(option.displayName + (option.value.map { " " + $0.name } ?? "")), "overview lacks \(option.displayName)")
        }
        let names = CommandSpecs.commands.map(\.name)
        #expect(Set(names).count == names.count, "\(names)")
        // The parser finds a command by the name it is listed under, then builds its spec.
        for (name, command) in CommandSpecs.named {
            #expect(command.spec.name == name, "\(command) is listed as \(name), its spec says \(command.spec.name)")
        }
        for command in CommandSpecs.commands {
            #expect(overview.contains("  \(command.name)  "), "overview lacks \(command.name)")
            #expect(!command.summary.isEmpty && !command.summary.contains("\n"), "\(command.name)")
            let longs = command.options.map(\.long)
            #expect(Set(longs).count == longs.count, "\(command.name) declares a long name twice: \(longs)")
            #expect(Set(longs).isDisjoint(with: globalLongs), "\(command.name) declares a global option's name: \(longs)")
            let shorts = (CommandSpecs.global + command.options).compactMap(\.short)
            #expect(Set(shorts).count == shorts.count, "\(command.name): short names \(shorts)")
            let help = try #require(CommandSpecs.help(for: command.name))
            // The usage line, its wrapped lines joined.
            let usage = help.components(separatedBy: "\n\n")[0].replacingOccurrences(of: "\n    ", with: " ")
            for option in command.options {
                checkWellFormed(option, in: command.name)
                let shown = CommandSpecs.shown(option)
                #expect(Self.description(of: shown, in: help) == option.help, "help \(command.name) lacks \(shown)")
                if command.isRequired(option) {
                    #expect(usage.contains(shown) && !usage.contains("[\(shown)]"), "\(command.name): \(usage)")
                } else {
                    #expect(usage.contains("[\(shown)]"), "\(command.name): \(usage)")
                }
            }
            for requirement in command.requirements {
                for long in requirement.alternatives.joined() {
                    #expect(command.options.contains { $0.long == long }, "\(command.name) requires --\(long), which it does not declare")
                }
            }
        }
        for text in [overview] + CommandSpecs.commands.compactMap({ CommandSpecs.help(for: $0.name) }) {
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                #expect(line.count <= CommandSpecs.helpWidth && !line.hasSuffix(" "), "\(line.count) columns: \(line)")
            }
        }
    }

    /// An option's help text as the help shows it: on the option's line, and
    /// on the lines indented to the same column below it.
    private static func description(of shown: String, in help: String) -> String? {
        let lines = help.split(separator: "\n").map(String.init)
        guard let index = lines.firstIndex(where: { $0.hasPrefix("  \(shown)  ") }) else { return nil }
        let first = lines[index]
        let column = first.count - first.dropFirst(2 + shown.count).drop(while: { $0 == " " }).count
        var words = [String(first.dropFirst(column))]
        for line in lines[(index + 1)...] {
            guard line.hasPrefix(String(repeating: " ", count: column)), line.dropFirst(column).first != " " else { break }
            words.append(String(line.dropFirst(column)))
        }
        return words.joined(separator: " ")
    }

    private func checkWellFormed(_ option: OptionSpec, in place: String) {
        #expect(!option.long.isEmpty && !option.long.hasPrefix("-") && !option.long.contains(" "), "\(place): \(option.long)")
        #expect(!option.help.isEmpty && !option.help.contains("\n"), "\(place) \(option.displayName): help must be one line")
        if let value = option.value {
            #expect(!value.name.isEmpty && !value.name.contains(" "), "\(place) \(option.displayName) has no value name")
            if case let .choice(choices) = value.kind {
                #expect(!choices.isEmpty && value.name == choices.joined(separator: "|"), "\(place) \(option.displayName): \(value.name)")
            }
        } else {
            #expect(!option.repeatable, "\(place) \(option.displayName): a flag is not repeatable")
        }
    }

    /// Each command parsed with every option of its spec, then read as the command
    /// reads it: it reads exactly the options its spec declares, no more (a read of
    /// an undeclared option would always be nil) and no fewer (a declared option
    /// nobody reads would be accepted and ignored).
    @Test func everyCommandReadsExactlyTheOptionsItsSpecDeclares() throws {
        for command in CommandSpecs.all {
            let spec = command.spec
            let parsed = try CommandSpecs.parser.parse(Self.everyOption(of: spec))
            #expect(parsed.command == spec.name)
            let read = Self.optionsRead(by: command, from: parsed)
            #expect(Set(read) == Set(spec.options.map(\.long)), "\(spec.name) reads \(read.sorted()), declares \(spec.options.map(\.long).sorted())")
        }
        let log = OptionReadLog()
        let parsed = try CommandSpecs.parser.parse(["status"] + CommandSpecs.global.flatMap(Self.arguments))
        let global = GlobalOptions(OptionValues(parsed, log: log))
        #expect(Set(log.longNames) == Set(CommandSpecs.global.map(\.long)), "global options read: \(log.longNames)")
        #expect(global.keystore == "keystore-value" && global.caFile == "ca-file-value" && global.json && global.version)
    }

    @Test func aCommandReadsTheValuesGiven() throws {
        let parsed = try CommandSpecs.parser.parse(["token", "--claim", "a=1", "--device-id", "id-1", "--claim=b=2", "--server", "https://idp"])
        let options = TokenCommand.Options(OptionValues(parsed))
        #expect(options.claims == ["a=1", "b=2"] && options.deviceID == "id-1" && options.server == "https://idp")
        let login = LoginCommand.Options(OptionValues(try CommandSpecs.parser.parse(["login", "--browser", "--par", "--inputs", "-", "--input", "x=y"])))
        #expect(login.browser && !login.deviceCode && login.signIn.par && login.scriptedInputs.file == "-" && login.scriptedInputs.inputs == ["x=y"])
        let browser = BrowserCommand.Options(OptionValues(try CommandSpecs.parser.parse(["browser", "uninstall", "--system", "--root=/stage", "--firefox"])))
        #expect(browser.action == "uninstall" && browser.system && browser.firefox && !browser.chromium && browser.root == "/stage" && browser.chromiumDirectory == nil)
        // A browser's arguments reach the host as operands, even one that looks like an option.
        let host = NativeHostCommand.Options(OptionValues(try CommandSpecs.parser.parse(["native-host", "--", "/m.json", "-x@example.org"])))
        #expect(host.callerArguments == ["/m.json", "-x@example.org"])
    }

    @Test func aChoiceIsCheckedAgainstTheChoicesHelpShows() throws {
        #expect(InitCommand.Options.backend.spec.value?.name == "auto|tpm|software")
        #expect(try InitCommand.Options.backend.choice("tpm") == .tpm)
        #expect(try InitCommand.Options.backend.choice(nil) == nil)
        let refusals = [
            (refusal { () throws(UsageError) in _ = try InitCommand.Options.backend.choice("hsm") },
             "--backend must be auto, tpm or software, not \"hsm\"", "init"),
            (refusal { () throws(UsageError) in _ = try PubkeyCommand.Options.format.choice("der") },
             "--format must be spki, pem, jwk or thumbprint, not \"der\"", "pubkey"),
            (refusal { () throws(UsageError) in _ = try VerifyCommand.Options.signatureFormat.choice("p1363") },
             "--signature-format must be der or raw, not \"p1363\"", "verify"),
        ]
        for (error, message, command) in refusals {
            #expect(error?.message == message && error?.command == command, "\(String(describing: error))")
        }
    }

    private func refusal(_ check: () throws(UsageError) -> Void) -> UsageError? {
        do {
            try check()
            return nil
        } catch {
            return error
        }
    }

    /// `NAME --flag --value V --repeatable V --repeatable V [operand]`.
    private static func everyOption(of spec: CommandSpec) -> [String] {
        [spec.name] + spec.options.flatMap(arguments) + (spec.maximumPositionals > 0 ? ["operand"] : [])
    }

    private static func arguments(_ option: OptionSpec) -> [String] {
        guard let value = option.value else { return [option.displayName] }
        let sample: String
        if case let .choice(choices) = value.kind { sample = choices[0] } else { sample = option.long + "-value" }
        return Array(repeating: [option.displayName, sample], count: option.repeatable ? 2 : 1).flatMap { $0 }
    }

    private static func optionsRead<Command: DevtrustCommand>(by command: Command.Type, from parsed: ParsedArguments) -> [String] {
        let log = OptionReadLog()
        _ = Command.Options(OptionValues(parsed, log: log))
        return log.longNames
    }
}
