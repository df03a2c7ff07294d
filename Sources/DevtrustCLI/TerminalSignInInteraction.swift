import DevtrustEncoding
import DevtrustErrors
import DevtrustFlow
import DevtrustSignIn
import DevtrustTerminal

/// The user's side of an app-native sign-in: `--authenticator` and `--input`
/// (by param name) first, the terminal for the rest unless `--non-interactive`.
final class TerminalSignInInteraction: AppNativeInteraction {
    private let context: CommandContext
    private var presets: [String: String]
    private let wantedAuthenticator: String?
    private let interactive: Bool

    init(context: CommandContext, presets: [String: String], authenticator: String?, interactive: Bool) {
        self.context = context
        self.presets = presets
        wantedAuthenticator = authenticator
        self.interactive = interactive
    }

    func note(_ text: String) { context.info(text) }

    private func show(_ messages: [AppNativeMessage]) {
        for message in messages {
            context.serverMessage(message.message, isError: message.type.uppercased() == "ERROR")
        }
    }

    func choose(_ options: [AppNativeAuthenticator], messages: [AppNativeMessage]) throws -> AppNativeAuthenticator {
        show(messages)
        let names = options.map { "\($0.name) (\(Self.internalName($0)))" }.joined(separator: ", ")
        if let wanted = wantedAuthenticator {
            return try Self.select(wanted, from: options)
        }
        guard interactive else {
            throw UsageError("the server offers several ways to sign in: \(names); choose one with --authenticator NAME", command: "login")
        }
        context.info("Sign in with:")
        for (index, option) in options.enumerated() { context.info("  [\(index + 1)] \(option.name)") }
        // Without `other`, only a number is an answer.
        guard case let .action(index) = try TerminalPrompter(messages: context.messages).choose("Choose 1-\(options.count): ", count: options.count, command: "login") else {
            throw UsageError("no choice was given", command: "login")
        }
        return options[index]
    }

    /// `--authenticator`: an option's id, or its name or internal name (any case), or the unique
    /// start of one; never the first of several that match, which would send credentials to a
    /// way of signing in the user did not mean.
    static func select(_ wanted: String, from options: [AppNativeAuthenticator]) throws -> AppNativeAuthenticator {
        let lowered = wanted.lowercased()
        func describe(_ list: [AppNativeAuthenticator]) -> String {
            list.map { "\($0.name) (\(internalName($0)), id \($0.id))" }.joined(separator: ", ")
        }
        if let byID = options.first(where: { $0.id == wanted }) { return byID }
        let exact = options.filter { $0.name.lowercased() == lowered || internalName($0).lowercased() == lowered }
        if exact.count == 1 { return exact[0] }
        if exact.count > 1 {
            throw UsageError("--authenticator \(wanted) names several of the server's options: \(describe(exact)); give the id of one", command: "login")
        }
        let started = options.filter { $0.name.lowercased().hasPrefix(lowered) || internalName($0).lowercased().hasPrefix(lowered) }
        if started.count == 1 { return started[0] }
        if started.count > 1 {
            throw UsageError("--authenticator \(wanted) is the start of several of the server's options: \(describe(started)); give more of the name, or the id", command: "login")
        }
        throw UsageError("--authenticator \(wanted) is not among the server's options: \(describe(options))", command: "login")
    }

    /// WSO2's authenticatorId is base64 of "Name:IdP" ("BasicAuthenticator:LOCAL"): the name users know.
    static func internalName(_ authenticator: AppNativeAuthenticator) -> String {
        guard let bytes = try? Base64.decode(authenticator.id, padding: .optional), let text = String(validating: bytes, as: UTF8.self),
              let name = text.split(separator: ":").first, !name.isEmpty else { return authenticator.id }
        return String(name)
    }

    func values(for authenticator: AppNativeAuthenticator, messages: [AppNativeMessage], failed: Bool) throws -> [(String, String)] {
        show(messages)
        if failed {
            // The server refused the last values: never resend them unchanged.
            guard interactive else {
                let reasons = messages.map(\.message).joined(separator: " ")
                throw SignInUnsupportedError("the server did not accept the values given for \(authenticator.name)" + (reasons.isEmpty ? "" : ": \(reasons)"))
            }
            for param in authenticator.params { presets[param.name] = nil }
        }
        let asked = authenticator.params.filter { presets[$0.name] == nil }
        guard interactive || asked.isEmpty else {
            throw MissingFlowInputsError(inputs: asked.map { ($0.name, $0.displayName) }, stepText: [authenticator.name])
        }
        var typed = [(String, String)]()
        if !asked.isEmpty {
            // The code first; a resend (where the authenticator has one) is reachable from its prompt.
            let resend = Self.resend(for: authenticator, asking: asked)
            let dialog = TerminalStepDialog(messages: context.messages, command: "login",
                                            actions: [.init(text: "Verify", identifier: nil)] + (resend == nil ? [] : [.init(text: "Resend code", identifier: nil)]),
                                            mainIndex: 0)
            switch try dialog.run(asked.map(Self.field)) {
            case let .main(values): typed = values
            case .other: return resend ?? []
            }
        }
        return authenticator.params.compactMap { param in
            presets[param.name].map { (param.name, $0) } ?? typed.first { $0.0 == param.name }
        }
    }

    /// The params of a code's prompt that ask for another code: WSO2's Email OTP and SMS OTP
    /// authenticators mail or text a new one on `resendCode=true` sent without the code (their
    /// metadata does not list it; a code sent with it is refused).
    static func resend(for authenticator: AppNativeAuthenticator, asking params: [AppNativeAuthenticator.Param]) -> [(String, String)]? {
        guard ["email-otp-authenticator", "sms-otp-authenticator"].contains(internalName(authenticator)),
              params.contains(where: { $0.name.lowercased() == "otpcode" }) else { return nil }
        return [("resendCode", "true")]
    }

    /// A param as the terminal asks for it: every one is required; one-time codes (Email and
    /// SMS OTP's OTPCode, TOTP's token) take no words, so a word typed there can name an action,
    /// and an action's name is never sent as the code (a wrong code uses up an attempt).
    static func field(_ param: AppNativeAuthenticator.Param) -> TerminalPrompter.Field {
        TerminalPrompter.Field(name: param.name, label: param.displayName ?? param.name, required: true, secret: param.confidential,
                               rules: [], holdsCode: ["otpcode", "token"].contains(param.name.lowercased()), problem: { _ in nil })
    }

    func callback(redirectURL: String, authenticator: AppNativeAuthenticator) throws -> [(String, String)] {
        context.info("Continue in a browser (\(authenticator.name)): \(redirectURL)")
        if let code = presets["code"], let state = presets["state"] { return [("code", code), ("state", state)] }
        guard interactive else {
            throw MissingFlowInputsError(inputs: [("code", "from the callback URL"), ("state", "from the callback URL")], stepText: [authenticator.name])
        }
        while true {
            guard let pasted = context.terminal.readLine(prompt: "Paste the URL the browser was sent back to: ") else {
                throw UsageError("no callback URL was given", command: "login")
            }
            let parameters = FormEncoding.queryParameters(pasted.trimmingCharacters)
            if let code = parameters["code"], let state = parameters["state"] { return [("code", code), ("state", state)] }
            context.warn("that URL has no code and state parameters; paste the whole address from the browser")
        }
    }
}
