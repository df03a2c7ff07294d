/// Asks for one value on the terminal until it passes `check` (which returns
/// why not, or nil); secrets are read without echo and never printed.
struct TerminalPrompter {
    let context: CommandContext

    /// What the user answered at a field's prompt.
    enum Reply: Equatable {
        case value(String)
        /// An optional field left empty.
        case skipped
        /// One of the step's other actions (an index the caller gave meaning to).
        case action(Int)
    }

    /// `Label (required, rule, rule; hint, hint): `
    static func promptText(_ label: String, required: Bool, rules: [String], hints: [String] = []) -> String {
        label + (required ? " (required" : " (optional") + (rules.isEmpty ? "" : ", " + rules.joined(separator: ", "))
            + (hints.isEmpty ? "" : "; " + hints.joined(separator: ", ")) + "): "
    }

    func ask(_ label: String, required: Bool, secret: Bool, rules: [String] = [], command: String,
             check: (String) -> String? = { _ in nil }) throws -> String? {
        guard case let .value(value) = try reply(label, required: required, secret: secret, rules: rules, command: command, check: check) else { return nil }
        return value
    }

    /// - Parameters:
    ///   - hints: what else the prompt takes, said in it (`r for Resend code`).
    ///   - action: the action a typed answer names, if any (checked before the value's rules).
    ///   - whenEmpty: for a required field: what an empty answer means instead of "required"
    ///     (the step's other actions); nil from it asks again.
    func reply(_ label: String, required: Bool, secret: Bool, rules: [String] = [], hints: [String] = [], command: String,
               action: (String) -> Int? = { _ in nil }, whenEmpty: (() throws -> Reply?)? = nil,
               check: (String) -> String? = { _ in nil }) throws -> Reply {
        let prompt = Self.promptText(label, required: required, rules: rules, hints: hints)
        while true {
            let read = secret ? context.terminal.readSecret(prompt: prompt) : context.terminal.readLine(prompt: prompt)
            guard let value = read?.trimmingCharacters(in: secret) else {
                throw UsageError("input ended before \(label) was given", command: command)
            }
            if let chosen = action(value.trimmingCharacters) { return .action(chosen) }
            if value.isEmpty {
                guard required else { return .skipped }
                guard let whenEmpty else { context.warn("\(label) is required"); continue }
                if let reply = try whenEmpty() { return reply }
                continue
            }
            if let problem = check(value) {
                context.warn("\(label) \(problem)")
                continue
            }
            return .value(value)
        }
    }
}
