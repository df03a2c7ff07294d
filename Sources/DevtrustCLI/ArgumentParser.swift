/// One option a command (or every command) accepts.
struct OptionSpec: Sendable {
    let long: String
    let short: Character?
    /// The value's name in help (`FILE`), nil for a flag.
    let valueName: String?
    let repeatable: Bool
    let help: String

    static func flag(_ long: String, short: Character? = nil, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: short, valueName: nil, repeatable: false, help: help)
    }

    static func value(_ long: String, _ valueName: String, repeatable: Bool = false, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: nil, valueName: valueName, repeatable: repeatable, help: help)
    }
}

struct CommandSpec: Sendable {
    let name: String
    let summary: String
    /// Positional arguments as shown in the usage line, e.g. `[CHALLENGE|-]`.
    let positionalUsage: String
    let maximumPositionals: Int
    let options: [OptionSpec]
}

/// The command line after parsing: which command, its options and operands.
struct ParsedArguments: Sendable {
    var command: String?
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    func value(_ long: String) -> String? { values[long]?.last }
    func all(_ long: String) -> [String] { values[long] ?? [] }
    func has(_ long: String) -> Bool { flags.contains(long) }
}

struct UsageError: Error, Sendable {
    let message: String
    /// The command whose usage to point at, if any.
    let command: String?

    init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }
}

/// Parses `devtrust [global options] COMMAND [options] [operands]`, with global
/// options also accepted after the command, `--opt=value`, and `--` ending options.
struct ArgumentParser {
    let globalOptions: [OptionSpec]
    let commands: [CommandSpec]

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
                if let _ = spec.valueName {
                    let value: String
                    if let inlineValue {
                        value = inlineValue
                    } else {
                        guard index < arguments.count else {
                            throw UsageError("option --\(spec.long) needs a value (\(spec.valueName!))", command: commandSpec?.name)
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
                guard let spec = commands.first(where: { $0.name == argument }) else {
                    throw UsageError("unknown command \"\(argument)\"; run `devtrust --help` for the list")
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
        if let command, command.maximumPositionals > 0 {
            throw UsageError("unknown option \(argument) (an argument that starts with \"-\" goes after `--`)", command: command.name)
        }
        throw UsageError("unknown option \(argument)", command: command?.name)
    }
}
