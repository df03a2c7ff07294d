import DevtrustErrors

/// Asks for one value on the terminal until it passes its field's rules; secrets are read
/// without echo and never printed. Also the numbered lists of choices.
package struct TerminalPrompter {
    package let messages: TerminalMessages

    package init(messages: TerminalMessages) {
        self.messages = messages
    }

    /// One value a step asks for, as the terminal asks for it.
    package struct Field {
        /// Its name in what is sent (`otp`, `OTPCode`).
        package let name: String
        package let label: String
        package let required: Bool
        /// Read without echo (passwords, codes).
        package let secret: Bool
        /// The server's rules in words, for the prompt.
        package let rules: [String]
        /// A one-time code or a number: no word is one of its values, so a word typed at its
        /// prompt can name an action, and the name of an action is never sent as its value.
        package let holdsCode: Bool
        /// Why the server's rules refuse a value, or nil.
        package let problem: (String) -> String?

        package init(name: String, label: String, required: Bool, secret: Bool, rules: [String], holdsCode: Bool,
                     problem: @escaping (String) -> String?) {
            self.name = name
            self.label = label
            self.required = required
            self.secret = secret
            self.rules = rules
            self.holdsCode = holdsCode
            self.problem = problem
        }
    }

    /// What the user answered at a field's prompt, or at a list of choices.
    package enum Reply: Equatable {
        case value(String)
        /// An optional field left empty.
        case skipped
        /// A choice: its index (from 0) in what the caller listed.
        case action(Int)
    }

    /// `Label (required, rule, rule; hint, hint): `
    package static func promptText(_ field: Field, hints: [String] = []) -> String {
        field.label + (field.required ? " (required" : " (optional") + (field.rules.isEmpty ? "" : ", " + field.rules.joined(separator: ", "))
            + (hints.isEmpty ? "" : "; " + hints.joined(separator: ", ")) + "): "
    }

    /// The field's value, or nil for an optional field left empty.
    package func ask(_ field: Field, command: String) throws -> String? {
        guard case let .value(value) = try reply(field, command: command) else { return nil }
        return value
    }

    /// - Parameters:
    ///   - hints: what else the prompt takes, said in it (`r for Resend code`).
    ///   - action: the action an answer names, if any (before the field's rules are checked).
    ///   - whenEmpty: for a required field: what an empty answer means instead of "required"
    ///     (the step's other actions); nil from it asks again.
    ///   - check: why the answer is no value of the field, if it is not (default: its rules).
    package func reply(_ field: Field, hints: [String] = [], command: String, action: (String) -> Int? = { _ in nil },
               whenEmpty: (() throws -> Reply?)? = nil, check: ((String) -> String?)? = nil) throws -> Reply {
        let prompt = Self.promptText(field, hints: hints)
        while true {
            let read = field.secret ? messages.terminal.readSecret(prompt: prompt) : messages.terminal.readLine(prompt: prompt)
            guard let value = read?.trimmingCharacters(in: field.secret) else {
                throw UsageError("input ended before \(field.label) was given", command: command)
            }
            if let chosen = action(value) { return .action(chosen) }
            if value.isEmpty {
                guard field.required else { return .skipped }
                guard let whenEmpty else { messages.warn("\(field.label) is required"); continue }
                if let reply = try whenEmpty() { return reply }
                continue
            }
            if let problem = (check ?? field.problem)(value) {
                messages.warn("\(field.label) \(problem)")
                continue
            }
            return .value(value)
        }
    }

    /// A numbered list of `count` choices: asks until the answer is one of the numbers (`.action`
    /// with its index, from 0) or `other` makes a reply of it; `other` returns nil having said why
    /// not (without it, devtrust asks for a number). `secret`: read without echo (the list may
    /// take a secret field's value).
    package func choose(_ prompt: String, count: Int, secret: Bool = false, command: String, other: ((String) -> Reply?)? = nil) throws -> Reply {
        while true {
            let read = secret ? messages.terminal.readSecret(prompt: prompt) : messages.terminal.readLine(prompt: prompt)
            guard let answer = read?.trimmingCharacters(in: secret) else {
                throw UsageError("no choice was given", command: command)
            }
            if let number = Int(answer.trimmingCharacters), (1...count).contains(number) { return .action(number - 1) }
            if let other {
                if let reply = other(answer) { return reply }
            } else {
                messages.warn("choose a number from 1 to \(count)")
            }
        }
    }
}

extension String {
    /// Without leading and trailing white space (and a terminal's carriage return).
    package var trimmingCharacters: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    /// Secrets keep inner and edge spaces; only the line ending goes.
    package func trimmingCharacters(in secret: Bool) -> String {
        secret ? String(reversed().drop(while: \.isNewline).reversed()) : trimmingCharacters
    }
}
