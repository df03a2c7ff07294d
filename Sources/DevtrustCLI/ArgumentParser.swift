import DevtrustErrors

/// What an option's value is: shown in help, checked where the command checks
/// it, and what a shell completes it with.
enum OptionValueKind: Sendable, Equatable {
    /// A path to a file (some options also take `-`, stdin).
    case file
    case directory
    case url
    /// One of a fixed set; help shows them as `a|b|c`.
    case choice([String])
    /// A sign-in profile's name (`signIn.profiles` of the configuration).
    case profile
    /// A devtrust command's name (`help COMMAND`).
    case command
    case text
}

/// One option a command (or every command) accepts.
struct OptionSpec: Sendable {
    /// An option's value: its name in help (`FILE`) and its kind.
    struct Value: Sendable {
        let name: String
        let kind: OptionValueKind
    }

    let long: String
    let short: Character?
    /// Nil for a flag.
    let value: Value?
    let repeatable: Bool
    let help: String

    /// `--long`, as messages name the option.
    var displayName: String { "--" + long }
}

/// Options a command cannot run without: one of `alternatives`, each a set of
/// options given together. Usage lines show them without brackets, e.g.
/// `--server URL` or `(--jwt TOKEN|- | --signature SIG --message FILE|-)`;
/// the command itself checks them, with its own message.
struct OptionRequirement: Sendable {
    /// Long names.
    let alternatives: [[String]]

    static func option(_ option: any DeclaredOption) -> Self {
        Self(alternatives: [[option.spec.long]])
    }

    static func oneOf(_ alternatives: [any DeclaredOption]...) -> Self {
        Self(alternatives: alternatives.map { $0.map(\.spec.long) })
    }
}

struct CommandSpec: Sendable {
    let name: String
    let summary: String
    /// Positional arguments as shown in the usage line, e.g. `[CHALLENGE|-]`.
    let positionalUsage: String
    let maximumPositionals: Int
    let options: [OptionSpec]
    let requirements: [OptionRequirement]
    /// What a shell completes the operand with, when the command takes one.
    let positionalKind: OptionValueKind?

    init(name: String, summary: String, positionalUsage: String = "", maximumPositionals: Int = 0, positionalKind: OptionValueKind? = nil,
         options: [any DeclaredOption], required requirements: [OptionRequirement] = []) {
        self.name = name
        self.summary = summary
        self.positionalUsage = positionalUsage
        self.maximumPositionals = maximumPositionals
        self.positionalKind = positionalKind
        self.options = options.map(\.spec)
        self.requirements = requirements
    }

    /// Whether a requirement names the option (usage shows it unbracketed).
    func isRequired(_ option: OptionSpec) -> Bool {
        requirements.contains { $0.alternatives.contains { $0.contains(option.long) } }
    }
}

/// An option key, declared once as a typed constant of the type that reads it
/// (`Owner`: `GlobalOptions`, or a command's options): its spec goes into the
/// owner's spec, and the same constant reads its value, so a misspelt or
/// foreign option does not compile.
protocol DeclaredOption: Sendable {
    var spec: OptionSpec { get }
}

/// `--name`, read as a Bool.
struct FlagOption<Owner>: DeclaredOption {
    let spec: OptionSpec

    init(_ long: String, short: Character? = nil, _ help: String) {
        spec = OptionSpec(long: long, short: short, value: nil, repeatable: false, help: help)
    }
}

/// `--name VALUE`, at most once, read as the text or nil.
struct ValueOption<Owner>: DeclaredOption {
    let spec: OptionSpec

    init(_ long: String, _ valueName: String, _ kind: OptionValueKind, _ help: String) {
        spec = OptionSpec(long: long, short: nil, value: .init(name: valueName, kind: kind), repeatable: false, help: help)
    }
}

/// `--name VALUE`, any number of times, read as the values in order.
struct RepeatableOption<Owner>: DeclaredOption {
    let spec: OptionSpec

    init(_ long: String, _ valueName: String, _ kind: OptionValueKind, _ help: String) {
        spec = OptionSpec(long: long, short: nil, value: .init(name: valueName, kind: kind), repeatable: true, help: help)
    }
}

/// `--name a|b|c`, at most once: the choices are `Choice`'s cases, written once
/// and used by help and by `choice(_:)`. Read as the text given, which the
/// command checks with `choice(_:)` where its other checks put that.
struct ChoiceOption<Owner, Choice: RawRepresentable & CaseIterable>: DeclaredOption where Choice.RawValue == String {
    let spec: OptionSpec

    init(_ long: String, _ help: String) {
        let choices = Choice.allCases.map(\.rawValue)
        spec = OptionSpec(long: long, short: nil, value: .init(name: choices.joined(separator: "|"), kind: .choice(choices)),
                          repeatable: false, help: help)
    }
}

extension ChoiceOption where Owner: CommandOptions {
    /// The choice `text` names (nil when the option was not given); a usage error naming the choices otherwise.
    func choice(_ text: String?) throws(UsageError) -> Choice? {
        guard let text else { return nil }
        guard let choice = Choice(rawValue: text) else {
            let choices = Choice.allCases.map(\.rawValue)
            let listed = choices.count > 1 ? choices.dropLast().joined(separator: ", ") + " or " + choices.last! : choices.joined()
            throw UsageError("\(spec.displayName) must be \(listed), not \"\(text)\"", command: Owner.spec.name)
        }
        return choice
    }
}

/// A type read from the command line: the global options, or one command's.
/// Its initializer reads each declared option once, whatever the others say
/// (CommandSpecTests checks that it reads exactly those).
protocol OptionOwner {
    static var declaredOptions: [OptionSpec] { get }
    init(_ values: OptionValues<Self>)
}

/// One command's options; `spec` lists the same keys the initializer reads.
protocol CommandOptions: OptionOwner {
    static var spec: CommandSpec { get }
}

extension CommandOptions {
    static var declaredOptions: [OptionSpec] { spec.options }
}

/// The command line after parsing: which command, its options and operands.
/// Read only through `OptionValues`, by typed keys.
struct ParsedArguments: Sendable {
    fileprivate(set) var command: String?
    fileprivate var values: [String: [String]] = [:]
    fileprivate var flags: Set<String> = []
    fileprivate(set) var positionals: [String] = []
}

/// Which options an `OptionValues` was asked for (the spec test reads them back).
final class OptionReadLog {
    private(set) var longNames: [String] = []

    func record(_ spec: OptionSpec) { longNames.append(spec.long) }
}

/// The parsed command line as `Owner` reads it: only by `Owner`'s keys.
struct OptionValues<Owner: OptionOwner> {
    let parsed: ParsedArguments
    let log: OptionReadLog?

    init(_ parsed: ParsedArguments, log: OptionReadLog? = nil) {
        self.parsed = parsed
        self.log = log
    }

    subscript(option: FlagOption<Owner>) -> Bool { parsed.flags.contains(read(option)) }
    subscript(option: ValueOption<Owner>) -> String? { parsed.values[read(option)]?.last }
    subscript(option: RepeatableOption<Owner>) -> [String] { parsed.values[read(option)] ?? [] }
    subscript<Choice>(option: ChoiceOption<Owner, Choice>) -> String? { parsed.values[read(option)]?.last }

    var positionals: [String] { parsed.positionals }

    /// An option the owner's spec does not list is never parsed: reading it is a
    /// mistake (a key made on the spot, a misspelt name), which the spec test
    /// finds. Any build stops at it rather than read a silent nil: a handful of
    /// string comparisons per option, against a spec built once.
    private func read(_ option: some DeclaredOption) -> String {
        if let log {
            log.record(option.spec)  // the spec test compares the reads with the spec
        } else {
            precondition(Owner.declaredOptions.contains { $0.long == option.spec.long },
                         "\(Owner.self) reads \(option.spec.displayName), which its spec does not list")
        }
        return option.spec.long
    }
}

/// Parses `devtrust [global options] COMMAND [options] [operands]`, with global
/// options also accepted after the command, `--opt=value`, and `--` ending options.
struct ArgumentParser {
    let globalOptions: [OptionSpec]
    /// Every command's name, in help's order.
    let commandNames: [String]
    /// A command's spec by its name, nil for no command: made when asked for,
    /// so that a command line builds its own command's spec and no other.
    let specNamed: (String) -> CommandSpec?

    init(globalOptions: [OptionSpec], commandNames: [String], specNamed: @escaping (String) -> CommandSpec?) {
        self.globalOptions = globalOptions
        self.commandNames = commandNames
        self.specNamed = specNamed
    }

    init(globalOptions: [OptionSpec], commands: [CommandSpec]) {
        self.init(globalOptions: globalOptions, commandNames: commands.map(\.name)) { name in commands.first { $0.name == name } }
    }

    /// Every command's spec: for a message about a command line refused.
    private var commands: [CommandSpec] { commandNames.compactMap(specNamed) }

    func parse(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var commandSpec: CommandSpec?
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if !optionsEnded && argument == "--" {
                optionsEnded = true
                continue
            }
            // A single-dash word longer than "-x" is an operand: base64url
            // challenges start with "-" one time in 64 (no bundled short flags).
            let isOperandWithDash = !argument.hasPrefix("--") && argument.count > 2 && (commandSpec?.maximumPositionals ?? 0) > 0
            if !optionsEnded && argument.hasPrefix("-") && argument != "-" && !isOperandWithDash {
                let (spec, inlineValue) = try lookUp(argument, command: commandSpec)
                if let valueSpec = spec.value {
                    let value: String
                    if let inlineValue {
                        value = inlineValue
                    } else {
                        guard index < arguments.count else {
                            throw UsageError("option --\(spec.long) needs a value (\(valueSpec.name))", command: commandSpec?.name)
                        }
                        value = arguments[index]
                        index += 1
                    }
                    if !spec.repeatable && parsed.values[spec.long] != nil {
                        throw UsageError("option --\(spec.long) is given more than once", command: commandSpec?.name)
                    }
                    parsed.values[spec.long, default: []].append(value)
                } else {
                    if inlineValue != nil {
                        throw UsageError("option --\(spec.long) takes no value", command: commandSpec?.name)
                    }
                    parsed.flags.insert(spec.long)
                }
                continue
            }
            if commandSpec == nil {
                guard commandNames.contains(argument), let spec = specNamed(argument) else {
                    let suggestions = NameSuggestions.closest(to: argument, among: commandNames)
                    throw UsageError("unknown command \"\(argument)\""
                                     + (suggestions.isEmpty ? "; run `devtrust --help` for the list" : NameSuggestions.phrase(suggestions, quoted: true)))
                }
                commandSpec = spec
                parsed.command = argument
                continue
            }
            parsed.positionals.append(argument)
        }
        if let commandSpec, parsed.positionals.count > commandSpec.maximumPositionals {
            let extra = parsed.positionals[commandSpec.maximumPositionals]
            throw UsageError("unexpected argument \"\(extra)\"", command: commandSpec.name)
        }
        return parsed
    }

    /// Whether `--json` is among the arguments (not as an option's value, not after `--`),
    /// for a command line that `parse` refused: its error is then reported as JSON too.
    func asksForJSON(_ arguments: [String]) -> Bool {
        var command: CommandSpec?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" { return false }
            if argument == "--json" { return true }
            if argument.hasPrefix("-") {
                let name = argument.hasPrefix("--") ? String(argument.dropFirst(2)) : nil
                let spec = (globalOptions + (command?.options ?? [])).first { name != nil ? $0.long == name : "-" + String($0.short ?? " ") == argument }
                if spec?.value != nil { index += 1 }
            } else if command == nil, commandNames.contains(argument) {
                command = specNamed(argument)
            }
        }
        return false
    }

    private func lookUp(_ argument: String, command: CommandSpec?) throws(UsageError) -> (OptionSpec, String?) {
        let candidates = globalOptions + (command?.options ?? [])
        if argument.hasPrefix("--") {
            let body = argument.dropFirst(2)
            let name: Substring
            let inlineValue: String?
            if let equals = body.firstIndex(of: "=") {
                name = body[..<equals]
                inlineValue = String(body[body.index(after: equals)...])
            } else {
                name = body
                inlineValue = nil
            }
            if let spec = candidates.first(where: { $0.long == name }) { return (spec, inlineValue) }
        } else if argument.count == 2, let spec = candidates.first(where: { $0.short == argument.last }) {
            return (spec, nil)
        }
        if command == nil, commands.contains(where: { $0.options.contains(where: { "--" + $0.long == argument.split(separator: "=").first.map(String.init) }) }) {
            throw UsageError("option \(argument) must come after the command it belongs to")
        }
        let typed = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
        let suggestion = typed.hasPrefix("--")
            ? NameSuggestions.phrase(NameSuggestions.closest(to: typed, among: candidates.map(\.displayName)), quoted: false) : ""
        if let command, command.maximumPositionals > 0 {
            throw UsageError("unknown option \(typed)\(suggestion) (an argument that starts with \"-\" goes after `--`)", command: command.name)
        }
        throw UsageError("unknown option \(typed)" + suggestion, command: command?.name)
    }
}
