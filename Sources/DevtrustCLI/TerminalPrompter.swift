/// Asks for one value on the terminal until it passes `check` (which returns
/// why not, or nil); secrets are read without echo and never printed.
struct TerminalPrompter {
    let context: CommandContext

    func ask(_ label: String, required: Bool, secret: Bool, rules: [String] = [], command: String,
             check: (String) -> String? = { _ in nil }) throws -> String? {
        let prompt = label + (required ? " (required" : " (optional") + (rules.isEmpty ? "" : ", " + rules.joined(separator: ", ")) + "): "
        while true {
            let read = secret ? context.terminal.readSecret(prompt: prompt) : context.terminal.readLine(prompt: prompt)
            guard let value = read?.trimmingCharacters(in: secret) else {
                throw UsageError("input ended before \(label) was given", command: command)
            }
            if value.isEmpty {
                if required { context.warn("\(label) is required"); continue }
                return nil
            }
            if let problem = check(value) {
                context.warn("\(label) \(problem)")
                continue
            }
            return value
        }
    }
}
