/// A server's step at the terminal when the user has a choice of actions: a flow's VIEW with
/// several buttons (Verify, Resend code), an app-native one-time code that can be sent again.
/// The fields come first, as on every web form: typing them is choosing the step's main action,
/// which is then not asked for, unless it accepts something (terms): that is always asked.
/// The other actions stay reachable without typing a field: a word of theirs typed at a field
/// that cannot hold it (`r` or `resend` at a code's prompt, said in the prompt: `r for Resend
/// code`), or Enter at a required field, which lists every action. An answer to that list that
/// is no action but a valid value for the step's only required field is taken as it (the list
/// is then read without echo when that field is a secret). The other actions send no field: the
/// server's main action is the one that takes them (`requiredParams`); a resend takes none.
package struct TerminalStepDialog {
    package typealias Field = TerminalPrompter.Field

    /// One of the step's actions, as the step names it.
    package struct Action {
        package let text: String
        /// What the step calls it (a button's actionId).
        package let identifier: String?

        package init(text: String, identifier: String?) {
            self.text = text
            self.identifier = identifier
        }
    }

    package enum Answer {
        /// The main action, with the values typed (optional fields left empty are not among them).
        case main([(String, String)])
        /// Another action: its index in `actions`.
        case other(Int)
    }

    package let messages: TerminalMessages
    /// The command that was run, for errors.
    package let command: String
    /// Every action of the step, in the step's order.
    package let actions: [Action]
    /// The action that sends the fields (a flow's PRIMARY button); Enter at the list of actions.
    package let mainIndex: Int
    /// The main action accepts something on the user's behalf (terms, a policy, consent): it is
    /// asked for even when fields were typed, so that typing a name never accepts unseen.
    package var mainIsAcceptance = false

    package init(messages: TerminalMessages, command: String, actions: [Action], mainIndex: Int) {
        self.messages = messages
        self.command = command
        self.actions = actions
        self.mainIndex = mainIndex
    }

    private var prompter: TerminalPrompter { TerminalPrompter(messages: messages) }
    private var others: [Int] { actions.indices.filter { $0 != mainIndex } }

    /// Asks for `fields` (those the script did not give), then for the action when what was
    /// typed does not say it: nothing typed and nothing required, no field to ask, or an
    /// acceptance.
    package func run(_ fields: [Field]) throws -> Answer {
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
        guard actions.count > 1, mainIsAcceptance || (values.isEmpty && required.isEmpty) else { return .main(values) }
        guard case let .action(index) = try choose(strayAnswersFor: nil), index != mainIndex else { return .main(values) }
        return .other(index)
    }

    private func ask(_ field: Field, takesStrayAnswers: Bool) throws -> TerminalPrompter.Reply {
        // The shortest of each action's shortcuts is said: `r for Resend code`, `more for 2 more options`.
        var hints = others.compactMap { index in
            shortcuts(of: index, at: field).min { $0.count < $1.count }.map { "\($0) for \(actions[index].text)" }
        }
        if field.required && hints.count < others.count { hints.append("Enter for other choices") }
        return try prompter.reply(
            field, hints: hints, command: command,
            action: { typed in action(named: typed, at: field) },
            whenEmpty: others.isEmpty ? nil : {
                switch try choose(strayAnswersFor: takesStrayAnswers ? field : nil) {
                case let .action(index): return index == mainIndex ? nil : .action(index) // the main action: its field again
                case let reply: return reply
                }
            },
            check: { value in refusal(of: value, at: field) ?? field.problem(value) })
    }

    /// The action another than the main one that `typed` names at `field`'s prompt, if any: one
    /// of its shortcuts there, and not a value of the field as typed (a rule can be case-sensitive:
    /// `R` is a value where `^[A-Z]$` is the rule, `r` Restart).
    private func action(named typed: String, at field: Field) -> Int? {
        let word = typed.trimmingCharacters.lowercased()
        guard let index = others.first(where: { shortcuts(of: $0, at: field).contains(word) }) else { return nil }
        return field.holdsCode || field.problem(typed) != nil ? index : nil
    }

    /// Why `value` is not sent as a code or number: it names an action (the main one's `verify`,
    /// or a word two actions share). A wrong code uses up one of the server's attempts.
    private func refusal(of value: String, at field: Field) -> String? {
        let word = value.trimmingCharacters.lowercased()
        guard field.holdsCode, Self.isWord(word), actions.indices.contains(where: { words(of: $0).contains(word) }) else { return nil }
        return "cannot be \"\(value.trimmingCharacters)\": that names a choice" + (others.isEmpty ? "" : " (Enter lists the choices)")
    }

    /// The list of actions: `[1] Verify  [2] Resend code  (Enter for 1): `; a number or an action's
    /// name chooses it. An answer that is no action is taken as the value of `strayAnswersFor`
    /// when its rules allow it (and said so); the list is then read without echo when that field
    /// is a secret (a password or a code typed there never shows).
    package func choose(strayAnswersFor field: Field?) throws -> TerminalPrompter.Reply {
        let hidden = field?.secret ?? false
        let choices = actions.enumerated().map { "[\($0.offset + 1)] \($0.element.text)" }.joined(separator: "  ")
        let prompt = "\(choices)  (Enter for \(mainIndex + 1)\(hidden ? "; typing hidden" : "")): "
        return try prompter.choose(prompt, count: actions.count, secret: hidden, command: command) { answer in
            let trimmed = answer.trimmingCharacters
            if trimmed.isEmpty { return .action(mainIndex) }
            let named = actions.indices.filter { words(of: $0).contains(trimmed.lowercased()) }
            if named.count == 1 { return .action(named[0]) }
            let refusal = "choose a number from 1 to \(actions.count)" + (field.map { ", or type the \($0.label)" } ?? "")
            // A small number is a choice mistyped, not a value; a code must look like one.
            guard let field, !Self.isSmallNumber(trimmed), !field.holdsCode || Self.looksLikeCode(trimmed) else {
                messages.warn(refusal)
                return nil
            }
            if let problem = field.problem(answer) {
                messages.warn(refusal + ": it \(problem)")
                return nil
            }
            messages.info("that is not one of the choices: taken as the \(field.label)")
            return .value(answer)
        }
    }

    /// One or two digits, not starting with 0: how a choice is typed (`3`, `12`); `042` and
    /// `000042` are codes.
    package static func isSmallNumber(_ text: String) -> Bool {
        (1...2).contains(text.count) && text.allSatisfy(\.isASCIIDigit) && text.first != "0"
    }

    /// What a one-time code looks like when typed where a choice was asked: ASCII letters and
    /// digits, a digit among them (`123456`, `A7K2QX`; not `abc`, which would be sent as a code).
    package static func looksLikeCode(_ text: String) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } && text.contains(where: \.isASCIIDigit)
    }

    /// Whether `text` has a character other than a digit: a digit string is a value of a code or
    /// number field, never an action's name there (`2` of "2 more options" at a NUMBER).
    package static func isWord(_ text: String) -> Bool {
        text.contains { !$0.isASCIIDigit }
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

    /// The words of another action that mean it at `field`'s prompt: those that name no other
    /// action of the step (the main one included), and that the field cannot hold: at a code or
    /// a number a word with a non-digit, at another field a word its rules refuse.
    private func shortcuts(of index: Int, at field: Field) -> [String] {
        let rivals = actions.indices.filter { $0 != index }.flatMap(words)
        return words(of: index).filter { word in
            !rivals.contains(word) && (field.holdsCode ? Self.isWord(word) : field.problem(word) != nil)
        }
    }
}

extension Character {
    package var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
