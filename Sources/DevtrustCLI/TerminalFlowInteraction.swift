import DevtrustFlow
import Glibc

/// The user's side of a registration flow: inputs given up front (`--input`,
/// `--inputs`), and a terminal for the rest unless `--non-interactive`.
/// Values typed or given are never printed.
final class TerminalFlowInteraction: FlowInteraction {
    private let context: CommandContext
    private var presets: [String: String]
    private let interactive: Bool
    private let openBrowser: Bool
    /// The input names of the last VIEW answered, and whether all came from presets.
    private var lastView: (names: [String], fromPresets: Bool)?

    init(context: CommandContext, presets: [String: String], interactive: Bool, openBrowser: Bool) {
        self.context = context
        self.presets = presets
        self.interactive = interactive
        self.openBrowser = openBrowser
    }

    private var terminal: any Terminal { context.terminal }

    func note(_ text: String) {
        context.info(text)
    }

    func answer(view step: FlowStep) throws -> ViewAnswer {
        render(step)
        let inputs = step.inputs.filter { $0.identifier != nil }
        let names = inputs.compactMap(\.identifier)
        let rejected = step.messages.contains { $0.type.uppercased() == "ERROR" }
        if rejected, let lastView, lastView.names == names {
            guard interactive else {
                let reasons = step.messages.filter { $0.type.uppercased() == "ERROR" }.map(\.message).joined(separator: " ")
                throw FlowUnsupportedError("the server did not accept the values given for this step: \(reasons)")
            }
            // Ask again for what the server refused rather than resend it.
            for name in names { presets[name] = nil }
        }

        let button = try chooseButton(step.buttons)
        let isPrimary = button == nil || button?.variant?.uppercased() == "PRIMARY" || step.buttons.count == 1
        var values = [(String, String)]()
        var missing = [(name: String, label: String?)]()
        var allFromPresets = true
        for input in inputs {
            let name = input.identifier!
            if let preset = presets[name] {
                if let problem = input.validations.lazy.compactMap({ $0.problem(with: preset) }).first {
                    throw UsageError("--input \(name): \(input.label ?? name) \(problem)", command: "register")
                }
                values.append((name, preset))
            } else if isPrimary && interactive {
                allFromPresets = false
                if let value = try prompt(for: input) { values.append((name, value)) }
            } else if isPrimary && input.required {
                missing.append((name, input.label))
            }
        }
        // requiredParams the components do not describe: only a preset can answer them.
        for name in step.requiredParams where !names.contains(name) {
            if let preset = presets[name] { values.append((name, preset)) } else if isPrimary { missing.append((name, nil)) }
        }
        guard missing.isEmpty else {
            throw MissingFlowInputsError(inputs: missing, stepText: step.components.flatMap(headings))
        }
        lastView = (names, allFromPresets)
        return ViewAnswer(actionId: button?.actionId, inputs: values)
    }

    func callback(redirectURL: String, step: FlowStep) throws -> [(String, String)] {
        context.info("Continue in a browser: \(redirectURL)")
        if openBrowser { launchBrowser(redirectURL) }
        if let code = presets["code"], let state = presets["state"] { return [("code", code), ("state", state)] }
        guard interactive else {
            throw MissingFlowInputsError(inputs: [("code", "from the callback URL"), ("state", "from the callback URL")], stepText: ["redirection to \(redirectURL)"])
        }
        while true {
            guard let pasted = terminal.readLine(prompt: "Paste the URL the browser was sent back to: ") else {
                throw UsageError("no callback URL was given", command: "register")
            }
            let parameters = Self.queryParameters(pasted)
            if let code = parameters["code"], let state = parameters["state"] { return [("code", code), ("state", state)] }
            context.warn("that URL has no code and state parameters; paste the whole address from the browser")
        }
    }

    // MARK: rendering and prompting

    private func render(_ step: FlowStep) {
        for line in step.components.flatMap(headings) { context.info(line) }
        for message in step.messages {
            let isError = message.type.uppercased() == "ERROR"
            let text = (isError ? "error: " : "") + message.message
            let colored = isError && terminal.errorIsTerminal && context.environment.variables["NO_COLOR"] == nil
            context.info(colored ? "\u{1B}[31m" + text + "\u{1B}[0m" : text)
        }
    }

    /// Display text of a component tree (headings, paragraphs), tags stripped.
    private func headings(_ component: FlowComponent) -> [String] {
        var lines = [String]()
        if ["TYPOGRAPHY", "RICH_TEXT"].contains(component.type), let text = component.text {
            let plain = Self.strippingTags(text)
            if !plain.isEmpty { lines.append(plain) }
        }
        return lines + component.children.flatMap(headings)
    }

    private func chooseButton(_ buttons: [FlowComponent]) throws -> FlowComponent? {
        guard buttons.count > 1 else { return buttons.first }
        let primaryIndex = buttons.firstIndex { $0.variant?.uppercased() == "PRIMARY" } ?? 0
        if let wanted = presets["actionId"], let chosen = buttons.first(where: { $0.actionId == wanted }) { return chosen }
        guard interactive else { return buttons[primaryIndex] }
        let choices = buttons.enumerated().map { "[\($0.offset + 1)] \($0.element.text ?? $0.element.actionId ?? "?")" }.joined(separator: "  ")
        while true {
            guard let answer = terminal.readLine(prompt: "\(choices)  (Enter for \(primaryIndex + 1)): ") else {
                throw UsageError("no choice was given", command: "register")
            }
            let trimmed = answer.trimmingCharacters
            if trimmed.isEmpty { return buttons[primaryIndex] }
            if let number = Int(trimmed), (1...buttons.count).contains(number) { return buttons[number - 1] }
            context.warn("choose a number from 1 to \(buttons.count)")
        }
    }

    private func prompt(for input: FlowComponent) throws -> String? {
        let label = input.label ?? input.identifier ?? "value"
        let rules = input.validations.compactMap(\.explanation)
        let prompt = label + (input.required ? " (required" : " (optional") + (rules.isEmpty ? "" : ", " + rules.joined(separator: ", ")) + "): "
        while true {
            let read = input.isSecret ? terminal.readSecret(prompt: prompt) : terminal.readLine(prompt: prompt)
            guard let value = read?.trimmingCharacters(in: input.isSecret) else {
                throw UsageError("input ended before \(label) was given", command: "register")
            }
            if value.isEmpty {
                if input.required { context.warn("\(label) is required"); continue }
                return nil
            }
            if let problem = input.validations.lazy.compactMap({ $0.problem(with: value) }).first {
                context.warn("\(label) \(problem)")
                continue
            }
            return value
        }
    }

    private func launchBrowser(_ url: String) {
        let variables = context.environment.variables
        guard variables["DISPLAY"] != nil || variables["WAYLAND_DISPLAY"] != nil else {
            context.info("(no desktop session here: open the URL on another device)")
            return
        }
        var pid: pid_t = 0
        let arguments = ["xdg-open", url]
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        if posix_spawnp(&pid, "xdg-open", nil, nil, &pointers, environ) != 0 {
            context.warn("could not start xdg-open; open the URL yourself")
        }
    }

    static func strippingTags(_ text: String) -> String {
        var result = ""
        var inTag = false
        for character in text {
            if character == "<" { inTag = true } else if character == ">" { inTag = false } else if !inTag { result.append(character) }
        }
        return result.trimmingCharacters
    }

    /// code and state from a pasted callback URL (or just its query string).
    static func queryParameters(_ text: String) -> [String: String] {
        let trimmed = text.trimmingCharacters
        let query = trimmed.split(separator: "?", maxSplits: 1).last.map { $0.split(separator: "#").first ?? "" } ?? ""
        var parameters = [String: String]()
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = percentDecoded(parts[0]), let value = percentDecoded(parts[1]) else { continue }
            parameters[name] = value
        }
        return parameters
    }

    static func percentDecoded(_ text: Substring) -> String? {
        var bytes = [UInt8]()
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(), let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

extension String {
    /// Without leading and trailing white space (and a terminal's carriage return).
    var trimmingCharacters: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    /// Secrets keep inner and edge spaces; only the line ending goes.
    func trimmingCharacters(in secret: Bool) -> String {
        secret ? String(reversed().drop(while: \.isNewline).reversed()) : trimmingCharacters
    }
}
