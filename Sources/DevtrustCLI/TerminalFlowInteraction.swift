import DevtrustEncoding
import DevtrustErrors
import DevtrustFlow
import DevtrustHTTP
import DevtrustSignIn
import DevtrustTerminal
import DevtrustURL
import Glibc

/// The user's side of a registration flow: inputs given up front (`--input`,
/// `--inputs`), and a terminal for the rest unless `--non-interactive`.
/// Values typed or given are never printed.
final class TerminalFlowInteraction: FlowInteraction {
    private let context: CommandContext
    private var presets: [String: String]
    private let interactive: Bool
    private let openBrowser: Bool
    /// Acceptance actions the user chose up front (`--accept`).
    private let acceptedActions: Set<String>
    /// The input names of the last VIEW answered, and whether all came from presets.
    private var lastView: (names: [String], fromPresets: Bool)?
    /// The action IDs of every button the flow showed, in order: what `--accept` could have named.
    private(set) var offeredActions = [String]()
    /// The `--accept` actions a step was answered with.
    private(set) var usedAcceptedActions = Set<String>()

    init(context: CommandContext, presets: [String: String], interactive: Bool, openBrowser: Bool, acceptedActions: Set<String> = []) {
        self.context = context
        self.presets = presets
        self.interactive = interactive
        self.openBrowser = openBrowser
        self.acceptedActions = acceptedActions
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

        let button: FlowComponent?
        // Whether the button is the one that sends the step's inputs (the main one); another
        // sends none of them, not even those given up front: the server's requiredParams are
        // the main action's, and a resend or a decline takes none.
        let sendsInputs: Bool
        // What the user typed at the step's dialog; nil when its fields are asked one by one below.
        var typed: [(String, String)]?
        let main = Self.primaryIndex(step.buttons)
        switch try scriptedButton(step.buttons) {
        case let .chosen(index):
            // No button (a step without one), the only one, a PRIMARY one or the one taken for main.
            button = index.map { step.buttons[$0] }
            sendsInputs = index.map { $0 == main || step.buttons[$0].variant?.uppercased() == "PRIMARY" } ?? true
        case .ask:
            // At a terminal, several actions: the fields first, then the action only if still in doubt.
            let buttons = step.buttons
            var dialog = TerminalStepDialog(messages: context.messages, command: "register", actions: buttons.map {
                TerminalStepDialog.Action(text: $0.text ?? $0.actionId ?? "?", identifier: $0.actionId)
            }, mainIndex: main)
            dialog.mainIsAcceptance = Self.isAcceptance(buttons[main])
            switch try dialog.run(inputs.filter { presets[$0.identifier!] == nil }.map(Self.field)) {
            case let .main(values):
                (button, sendsInputs, typed) = (buttons[main], true, values)
            case let .other(index):
                (button, sendsInputs) = (buttons[index], false)
            }
        }
        guard sendsInputs else {
            // A one-time code given up front was for the code the server had sent: after another
            // action (a resend) it is not sent again; the new one is asked for, or named as missing.
            for input in inputs where input.variant?.uppercased() == "OTP" { presets[input.identifier!] = nil }
            lastView = (names, false)
            return ViewAnswer(actionId: button?.actionId, inputs: [])
        }
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
            } else if let typed {
                allFromPresets = false
                if let value = typed.first(where: { $0.0 == name }) { values.append(value) }
            } else if interactive {
                allFromPresets = false
                if let value = try TerminalPrompter(messages: context.messages).ask(Self.field(input), command: "register") { values.append((name, value)) }
            } else if input.required {
                missing.append((name, input.label))
            }
        }
        // requiredParams the components do not describe: only a preset can answer them.
        for name in step.requiredParams where !names.contains(name) {
            if let preset = presets[name] { values.append((name, preset)) } else { missing.append((name, nil)) }
        }
        guard missing.isEmpty else {
            throw MissingFlowInputsError(inputs: missing, stepText: step.components.flatMap(headings))
        }
        lastView = (names, allFromPresets)
        return ViewAnswer(actionId: button?.actionId, inputs: values)
    }

    func callback(redirectURL: String, step: FlowStep) throws -> [(String, String)] {
        context.info("Continue in a browser: \(redirectURL)")
        if let code = presets["code"], let state = presets["state"] {
            // The answer is given: a browser would have nothing to bring back.
            if openBrowser { context.info("(--open: not opening the browser, the code and state were given)") }
            return [("code", code), ("state", state)]
        }
        var page = openBrowser ? openThroughHandoff(redirectURL) : nil
        guard interactive else {
            // No prompt to serve the page beside: it is served until the browser fetched it (at most 60 s).
            if let page {
                _ = waitForBrowser(page, deadline: LoopbackRedirectListener.now() + Self.handoffWaitSeconds * 1000, prompt: nil)
                page.listener.close()
            }
            throw MissingFlowInputsError(inputs: [("code", "from the callback URL"), ("state", "from the callback URL")], stepText: ["redirection to \(redirectURL)"])
        }
        defer { page?.listener.close() }
        let prompt = "Paste the URL the browser was sent back to: "
        while true {
            // The page is served while the prompt waits, until the browser fetched it: a line typed
            // meanwhile (a wrong one, an Enter) does not take it from a browser still starting.
            let typed: String?
            if let open = page {
                terminal.writeError(prompt)
                if waitForBrowser(open, deadline: LoopbackRedirectListener.now() + Self.handoffPromptSeconds * 1000, prompt: prompt) != .typed {
                    open.listener.close()
                    page = nil
                }
                typed = terminal.readLine(prompt: "")
            } else {
                typed = terminal.readLine(prompt: prompt)
            }
            guard let pasted = typed else {
                throw UsageError("no callback URL was given", command: "register")
            }
            let parameters = FormEncoding.queryParameters(pasted.trimmingCharacters)
            if let code = parameters["code"], let state = parameters["state"] { return [("code", code), ("state", state)] }
            context.warn("that URL has no code and state parameters; paste the whole address from the browser")
        }
    }

    // MARK: rendering and prompting

    private func render(_ step: FlowStep) {
        for line in step.components.flatMap(headings) { context.info(line) }
        for message in step.messages {
            context.serverMessage(message.message, isError: message.type.uppercased() == "ERROR")
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

    /// Whether a button accepts something on the user's behalf (terms, a policy, consent).
    static func isAcceptance(_ button: FlowComponent) -> Bool {
        let words = [button.actionId, button.text].compactMap { $0?.lowercased() }
        return words.contains { text in ["accept", "agree", "consent"].contains { text.includes($0) } }
    }

    private enum ButtonChoice {
        /// Chosen: its index among the step's buttons (nil: the step has none).
        case chosen(Int?)
        /// For the user to choose at the terminal, with the step's fields (TerminalStepDialog).
        case ask
    }

    private static func primaryIndex(_ buttons: [FlowComponent]) -> Int {
        buttons.firstIndex { $0.variant?.uppercased() == "PRIMARY" } ?? 0
    }

    /// The button a script chose (`--input actionId`, `--accept`), the only one, or off a
    /// terminal the primary; `.ask` at a terminal when there are several.
    private func scriptedButton(_ buttons: [FlowComponent]) throws -> ButtonChoice {
        for id in buttons.compactMap(\.actionId) where !offeredActions.contains(id) { offeredActions.append(id) }
        if let wanted = presets["actionId"], let chosen = buttons.firstIndex(where: { $0.actionId == wanted }) {
            if acceptedActions.contains(wanted) { usedAcceptedActions.insert(wanted) }
            // `--input actionId=ID` answers one step, the first that offers ID: a resend given so is
            // one resend, not one at every step that offers it. (`--accept` names acceptances, each
            // taken wherever it is offered.)
            presets["actionId"] = nil
            return .chosen(chosen)
        }
        if let chosen = buttons.firstIndex(where: { $0.actionId.map(acceptedActions.contains) ?? false }) {
            usedAcceptedActions.insert(buttons[chosen].actionId!)
            return .chosen(chosen)
        }
        let primaryIndex = Self.primaryIndex(buttons)
        // Off a terminal, devtrust never accepts on the user's behalf: the choice must be given.
        if !interactive, buttons.indices.contains(primaryIndex), Self.isAcceptance(buttons[primaryIndex]) {
            let action = buttons[primaryIndex]
            let id = action.actionId ?? "?"
            let others = buttons.compactMap(\.actionId).filter { $0 != id }
            let given = acceptedActions.sorted()
            throw UsageError("this step asks to accept (action \(id)" + (action.text.map { ", \"\($0)\"" } ?? "") + "); devtrust does not accept for you when not at a terminal: "
                             + (given.isEmpty ? "" : "--accept \(given.joined(separator: ", ")) names no action of this step; ")
                             + "pass --accept \(id) (or \"actionId\": \"\(id)\" in --inputs)"
                             + (others.isEmpty ? "" : ", or --input actionId=\(others[0]) to decline"), command: "register")
        }
        guard buttons.count > 1 else { return .chosen(buttons.isEmpty ? nil : 0) }
        guard interactive else { return .chosen(primaryIndex) }
        return .ask
    }

    /// An INPUT as the terminal asks for it.
    static func field(_ input: FlowComponent) -> TerminalPrompter.Field {
        TerminalPrompter.Field(
            name: input.identifier ?? "", label: input.label ?? input.identifier ?? "value", required: input.required, secret: input.isSecret,
            rules: input.validations.compactMap(\.explanation), holdsCode: ["OTP", "NUMBER"].contains(input.variant?.uppercased() ?? ""),
            problem: { value in input.validations.lazy.compactMap { $0.problem(with: value) }.first })
    }

    /// How long `register --open` serves the handoff page when nothing is asked at the terminal
    /// (a script's run): a browser that starts takes seconds; one that never fetches it leaves
    /// the URL printed above. At the paste prompt, the page is served while the prompt waits
    /// (at most `handoffPromptSeconds`), until the browser fetched it or something is typed.
    static let handoffWaitSeconds: Int64 = 60
    static let handoffPromptSeconds: Int64 = 1_800

    /// The handoff page of a redirection step's URL, and the xdg-open that was given it.
    final class HandoffPage {
        let listener: LoopbackRedirectListener
        var launcher: pid_t
        /// Other users already warned about (once each, across the prompt's rounds).
        var warnedUIDs = Set<UInt32>()

        init(listener: LoopbackRedirectListener, launcher: pid_t) {
            self.listener = listener
            self.launcher = launcher
        }
    }

    /// Starts the browser on a handoff page of a loopback listener of its own, which sends it on
    /// to `url` (nil, having said why, when it could not start it).
    private func openThroughHandoff(_ url: String) -> HandoffPage? {
        guard let redirect = LoopbackRedirect("http://127.0.0.1/") else { return nil }
        let listener: LoopbackRedirectListener
        do {
            listener = try LoopbackRedirectListener(redirect)
        } catch {
            context.warn("not opening the browser: \(error.description); open the URL yourself")
            return nil
        }
        guard let launcher = Self.launchBrowser(handingOff: url, through: listener, context: context) else {
            listener.close()
            return nil
        }
        return HandoffPage(listener: listener, launcher: launcher)
    }

    /// How a wait for the browser ended.
    enum BrowserWait {
        case fetched, failed, typed, timedOut
    }

    /// Serves the page until the browser fetched it, xdg-open failed, the deadline passed or,
    /// when a `prompt` is on the terminal, something is typed there (left to be read). A warning
    /// meanwhile goes on a line of its own, and the prompt is written again. The caller closes
    /// the page. Ctrl-C ends register here as at its prompts (no handler is set).
    private func waitForBrowser(_ page: HandoffPage, deadline: Int64, prompt: String?) -> BrowserWait {
        if prompt == nil { context.info("Waiting for the browser to open the page (up to \(Self.handoffWaitSeconds) s) ...") }
        func warn(_ text: String) {
            guard let prompt else { return context.warn(text) }
            terminal.writeError("\n")
            context.warn(text)
            terminal.writeError(prompt)
        }
        var failed = false
        var typed = false
        let came = (try? page.listener.waitForHandoff(deadline: deadline, giveUp: {
            var status: Int32 = 0
            if page.launcher > 0, waitpid(page.launcher, &status, WNOHANG) == page.launcher {
                page.launcher = 0
                failed = !((status & 0x7F) == 0 && (status >> 8) & 0xFF == 0)
            }
            if prompt != nil {
                var input = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                typed = poll(&input, 1, 0) > 0
            }
            return failed || typed
        }, ignored: { reason in
            guard case let .otherUser(uid) = reason, !page.warnedUIDs.contains(uid) else { return }
            page.warnedUIDs.insert(uid)
            warn("refused the page to another user's connection (uid \(uid)): only your own browser is sent on to the URL")
        })) ?? false
        if came { return .fetched }
        if failed {
            page.listener.withdraw()
            warn("xdg-open could not open a browser; open the URL above yourself")
            return .failed
        }
        if typed { return .typed }
        warn("no browser opened the page within \(prompt == nil ? Self.handoffWaitSeconds : Self.handoffPromptSeconds) s; open the URL above yourself")
        return .timedOut
    }

    /// Only what a browser should be handed from a server: https, or http to this machine.
    /// (xdg-open also opens files, runs `.desktop` entries and takes `-options`.)
    static func isWebURL(_ url: String) -> Bool {
        let reference = URLReference(url)
        guard let scheme = reference.scheme?.lowercased(), let authority = reference.authority, !authority.isEmpty,
              url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }),
              let origin = try? ServerURL(scheme + "://" + authority) else { return false }
        return origin.scheme == "https" || origin.isLoopback
    }

    /// Starts the browser on `listener`'s handoff page, which sends the user's own browser on to
    /// `url`: the URL (a state, a PKCE challenge, a device token, a pushed request's URI) never
    /// goes on xdg-open's or the browser's command line, which every user can read in /proc.
    /// nil, having said why, as `launchBrowser`. The page is offered only while a browser is being
    /// started: with no desktop, or when xdg-open cannot start, it sends nobody on (the caller
    /// withdraws it too when xdg-open fails later), so that nothing but that browser is waited for.
    static func launchBrowser(handingOff url: String, through listener: LoopbackRedirectListener, context: CommandContext,
                              noDesktop: String = "(no desktop session here: open the URL on another device)") -> pid_t? {
        guard isWebURL(url) else {
            context.warn("not opening \(url) in a browser: only https URLs (or http to this machine) are opened; open it yourself if you trust it")
            return nil
        }
        guard hasDesktop(context) else {
            context.info(noDesktop)
            return nil
        }
        // A random last part: a page in the browser, or a user of a forwarded port, cannot guess it.
        guard let key = try? PKCE.state(using: context.environment.random) else {
            context.warn("not opening the browser: no randomness for its page; open the URL yourself")
            return nil
        }
        listener.offer(url, key: key)
        guard let handoff = listener.handoffURL, let launcher = launchBrowser(handoff, context: context, noDesktop: noDesktop) else {
            listener.withdraw()
            return nil
        }
        return launcher
    }

    /// Whether there is a desktop session to open a browser in.
    static func hasDesktop(_ context: CommandContext) -> Bool {
        let variables = context.environment.variables
        return variables["DISPLAY"] != nil || variables["WAYLAND_DISPLAY"] != nil
    }

    /// Starts `xdg-open URL` (its output to /dev/null: a browser it starts writes there
    /// too, not over devtrust's prompts) and returns its process id, or nil, having said
    /// why, when the URL is not a web URL, there is no desktop session or it cannot start.
    /// The caller may reap it (`waitpid`); xdg-open can run as long as the browser it starts.
    @discardableResult
    static func launchBrowser(_ url: String, context: CommandContext, noDesktop: String = "(no desktop session here: open the URL on another device)") -> pid_t? {
        guard isWebURL(url) else {
            context.warn("not opening \(url) in a browser: only https URLs (or http to this machine) are opened; open it yourself if you trust it")
            return nil
        }
        guard hasDesktop(context) else {
            context.info(noDesktop)
            return nil
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        let arguments = ["xdg-open", url]
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        if posix_spawnp(&pid, "xdg-open", &actions, nil, &pointers, environ) != 0 {
            context.warn("could not start xdg-open; open the URL yourself")
            return nil
        }
        return pid
    }

    static func strippingTags(_ text: String) -> String {
        var result = ""
        var inTag = false
        for character in text {
            if character == "<" { inTag = true } else if character == ">" { inTag = false } else if !inTag { result.append(character) }
        }
        return result.trimmingCharacters
    }
}
