/// A server's step at the terminal when the user has a choice of actions: a flow's VIEW with
/// several buttons (Verify, Resend code), an app-native one-time code that can be sent again.
/// The fields come first, as on every web form: typing them is choosing the step's main action,
/// which is then not asked for. The other actions stay reachable without typing a field: a word
/// of theirs typed at a field that cannot hold it (`r` or `resend` at a code's prompt, said in
/// the prompt: `r for Resend code`), or Enter at a required field, which lists every action. An answer to that list
/// that is no action but a valid value for the step's only required field is taken as it.
/// The other actions send no field: the server's main action is the one that takes them
/// (`requiredParams`); a resend takes none.
struct TerminalStepDialog {
    /// One value the step asks for.
    struct Field {
        /// Its name in what is sent (`otp`, `OTPCode`).
        let name: String
        let label: String
        let required: Bool
        /// Read without echo (passwords, codes).
        let secret: Bool
        /// A reusable secret: worth a word when the terminal showed it.
        let isPassword: Bool
        /// The server's rules in words, for the prompt.
        let rules: [String]
        /// A one-time code or a number: no word is one, so a word typed at its prompt can name an
        /// action. (An alphanumeric code that spells "resend" would resend: a new code, no harm.)
        let holdsCode: Bool
        /// Why the server's rules refuse a value, or nil.
        let problem: (String) -> String?
    }

    /// One of the step's actions, as the step names it.
    struct Action {
        let text: String
        /// What the step calls it (a button's actionId).
        let identifier: String?
    }

    /// An answer to the list of actions.
    enum Choice: Equatable {
        case action(Int)
        /// A value for the step's only required field, typed at the list.
        case value(String)
    }

    enum Answer {
        /// The main action, with the values typed (optional fields left empty are not among them).
        case main([(String, String)])
        /// Another action: its index in `actions`.
        case other(Int)
    }

    let context: CommandContext
    /// The command that was run, for errors.
    let command: String
    /// Every action of the step, in the step's order.
    let actions: [Action]
    /// The action that sends the fields (a flow's PRIMARY button); Enter at the list of actions.
    let mainIndex: Int

    /// Asks for `fields` (those the script did not give), then for the action only when what was
    /// typed does not say it: nothing typed and nothing required, or no field to ask.
    func run(_ fields: [Field]) throws -> Answer {
        let required = fields.filter(\.required)
        // A stray answer to the list is taken for a field only when there is no doubt which.
        let onlyRequired = required.count == 1 ? required[0].name : nil
        var values = [(String, String)]()
        for field in fields {
            switch try ask(field, takesStrayAnswers: field.name == onlyRequired) {
            case let .value(value): values.append((field.name, value))
            case .skipped: break
            case let .action(index): return .other(index)
            }
        }
        guard values.isEmpty && required.isEmpty && actions.count > 1 else { return .main(values) }
        guard case let .action(index) = try choose(strayAnswersFor: nil), index != mainIndex else { return .main(values) }
        return .other(index)
    }

    private func ask(_ field: Field, takesStrayAnswers: Bool) throws -> TerminalPrompter.Reply {
        let others = actions.indices.filter { $0 != mainIndex }
        var hints = others.compactMap { index in
            shortcuts(of: index, at: field).first.map { "\($0) for \(actions[index].text)" }
        }
        if field.required && hints.count < others.count { hints.append("Enter for other choices") }
        return try TerminalPrompter(context: context).reply(
            field.label, required: field.required, secret: field.secret, rules: field.rules, hints: hints, command: command,
            action: { typed in others.first { shortcuts(of: $0, at: field).contains(typed.lowercased()) } },
            whenEmpty: others.isEmpty ? nil : {
                switch try choose(strayAnswersFor: takesStrayAnswers ? field : nil) {
                case let .action(index): return index == mainIndex ? nil : .action(index) // the main action: its field again
                case let .value(value): return .value(value)
                }
            },
            check: field.problem)
    }

    /// The list of actions: `[1] Verify  [2] Resend code  (Enter for 1): `. An answer that is no
    /// action is taken as the value of `strayAnswersFor`, when its rules allow it, and said so.
    func choose(strayAnswersFor field: Field?) throws -> Choice {
        let choices = actions.enumerated().map { "[\($0.offset + 1)] \($0.element.text)" }.joined(separator: "  ")
        while true {
            guard let answer = context.terminal.readLine(prompt: "\(choices)  (Enter for \(mainIndex + 1)): ") else {
                throw UsageError("no choice was given", command: command)
            }
            let trimmed = answer.trimmingCharacters
            if trimmed.isEmpty { return .action(mainIndex) }
            if let number = Int(trimmed), actions.indices.contains(number - 1) { return .action(number - 1) }
            let named = actions.indices.filter { words(of: $0).contains(trimmed.lowercased()) }
            if named.count == 1 { return .action(named[0]) }
            // A small number is a choice mistyped, not a value.
            if let field, !(Int(trimmed).map { $0 < 100 } ?? false) {
                let value = answer.trimmingCharacters(in: field.secret)
                if !value.isEmpty, field.problem(value) == nil {
                    context.info("that is not one of the choices: taken as the \(field.label)" + (field.isPassword ? " (the terminal showed it as you typed it)" : ""))
                    return .value(value)
                }
            }
            context.warn("choose a number from 1 to \(actions.count)" + (field.map { ", or type the \($0.label)" } ?? ""))
        }
    }

    /// What names an action when typed: its first letter, first word, text, identifier.
    private func words(of index: Int) -> [String] {
        let action = actions[index]
        let text = action.text.lowercased()
        let firstWord = text.split(separator: " ").first.map(String.init)
        var words = [String]()
        for word in [text.first.map(String.init), firstWord, text, action.identifier?.lowercased()] {
            if let word, !word.isEmpty, !words.contains(word) { words.append(word) }
        }
        return words
    }

    /// The words of another action that mean it at `field`'s prompt: those the field cannot hold,
    /// and that name no other of the step's other actions.
    private func shortcuts(of index: Int, at field: Field) -> [String] {
        let rivals = actions.indices.filter { $0 != index && $0 != mainIndex }.flatMap(words)
        return words(of: index).filter { word in !rivals.contains(word) && (field.holdsCode || field.problem(word) != nil) }
    }
}
