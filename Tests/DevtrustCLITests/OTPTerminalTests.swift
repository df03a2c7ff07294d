import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// devtrust in a real terminal emulator (tmux, 80×24), answered as a person answers it: each
/// answer typed once devtrust waits at a prompt, each prompt read off the screen.
final class TerminalConversation {
    let session: TmuxSession
    /// How much devtrust had written when the last answer was typed: a prompt after it is a new one.
    private var answered = 0

    init(_ cli: DevtrustBinary, _ arguments: [String]) throws {
        var environment = cli.environment
        environment["TERM"] = "xterm"
        environment["LANG"] = "C.UTF-8"
        session = try TmuxSession(columns: 80, rows: 24, command: [cli.path] + arguments, environment: environment)
    }

    /// The prompt devtrust waits at next, as its row on the screen reads (trailing space
    /// trimmed); nil when devtrust ended first. devtrust is at a prompt when what it wrote
    /// since the last answer ends with ": " (a prompt; every other line ends with a newline).
    func nextPrompt() throws -> String? {
        var prompt: String?
        let seen = try session.waitForScreen { [self] screen in
            if session.exitStatus() != nil {
                prompt = nil
                return true
            }
            // The pty ends lines with CR LF, one Character to Swift: the last line after the last LF.
            let output = session.output
            guard output.utf8.count > answered, output.hasSuffix(": ") else { return false }
            let line = Self.plain(output.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).last.map(String.init) ?? "")
            prompt = String(line.reversed().drop { $0 == " " }.reversed())
            return screen.last { !$0.isEmpty } == prompt
        }
        guard seen != nil else { throw TmuxError("devtrust neither prompted nor ended within 60 s; it wrote: \(session.output.debugDescription)") }
        return prompt
    }

    func answer(_ text: String) throws {
        answered = session.output.utf8.count
        try session.type(text + "\n")
    }

    /// devtrust's exit status once it has ended (nil when it did not within 60 s).
    func exitStatus() throws -> Int32? {
        _ = try session.waitForScreen { [self] _ in session.exitStatus() != nil }
        return session.exitStatus()
    }

    /// The screen as one text, rows joined (wrapped lines joined back).
    var screen: String { ((try? session.screen()) ?? []).joined(separator: "\n") }

    private static func plain(_ text: String) -> String {
        text.replacing(#/\x1B\[[0-9;?]*[A-Za-z]/#, with: "").replacingOccurrences(of: "\r", with: "")
    }
}

/// A device with a software key, a reference server whose OTP steps send random codes (read
/// from its outbox), and devtrust in a terminal, its prompts up to the code answered.
struct AtTheCode {
    let directory = TemporaryDirectory()
    let server: ReferenceServer
    let dialog: TerminalConversation
    /// The prompt the code's step showed first.
    let prompt: String?

    /// - Parameters:
    ///   - arguments: devtrust's command line for the server.
    ///   - answers: each prompt before the code's, and what is typed at it.
    ///   - serverArguments: reference_server.py options.
    init(_ arguments: (ReferenceServer) -> [String], server serverArguments: [String] = [], answering answers: [(prompt: String, answer: String)]) throws {
        server = try ReferenceServer(serverArguments, otp: nil)
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q", "--backend", "software")
        dialog = try TerminalConversation(cli, arguments(server))
        for (expected, answer) in answers {
            #expect(try dialog.nextPrompt() == expected, "\(dialog.screen)")
            try dialog.answer(answer)
        }
        prompt = try dialog.nextPrompt()
    }

    /// Types another code than the one mailed: the server's `refusal` is shown and `prompt`
    /// asked again; then types the mailed one.
    func typeAWrongCodeThenTheRightOne(refusal: String, prompt: String) throws {
        let code = try #require(try server.outbox().last)
        // Another code of six digits.
        try dialog.answer(String(code.enumerated().map { $0.offset == 0 ? ($0.element == "1" ? "2" : "1") : $0.element }))
        #expect(try dialog.nextPrompt() == prompt, "\(dialog.screen)")
        #expect(dialog.screen.contains(refusal), "\(dialog.screen)")
        try dialog.answer(code)
    }

    /// Types `r`: the server's `notice` of a new code is shown, `prompt` asked again and the
    /// outbox holds a second code; then types that one.
    func typeResendThenTheNewCode(notice: String, prompt: String) throws {
        try dialog.answer("r")
        #expect(try dialog.nextPrompt() == prompt, "\(dialog.screen)")
        #expect(dialog.screen.contains(notice) && !dialog.screen.contains("error:"), "\(dialog.screen)")
        let codes = try server.outbox()
        #expect(codes.count == 2, "the outbox: \(codes)")
        try dialog.answer(try #require(codes.last))
    }

    /// devtrust ended with exit 0, saying `success`, asking nothing more.
    func finished(saying success: String) throws {
        #expect(try dialog.nextPrompt() == nil, "devtrust asks again instead of finishing:\n\(dialog.screen)")
        #expect(try dialog.exitStatus() == 0, "\(dialog.screen)")
        #expect(dialog.screen.contains(success), "\(dialog.screen)")
    }
}

/// `devtrust register` at a terminal against the reference server's OTP step (random codes,
/// read from its outbox): the code typed first is the code (issue 26); Resend is typed at the
/// code's prompt and mails a second code, which registers; a wrong code shows the server's
/// message and the code is asked for again.
@Suite(.enabled(if: TmuxSession.shouldRun && ReferenceServer.shouldRun)) struct RegisterOTPTerminalTests {
    static let codePrompt = "Verification code (required, 6 characters; r for Resend code):"

    /// `register` at the OTP step's prompt, the credentials typed.
    static func atTheCode() throws -> AtTheCode {
        try AtTheCode({ ["register", "--server", $0.url] }, answering: [
            ("Email (required):", "alice@example.com"), ("Password (required, 8 to 64 characters):", "correct horse"),
        ])
    }

    static func registered(_ run: AtTheCode) throws {
        try run.finished(saying: "registered: this device is ")
        #expect(try run.server.devices().count == 1)
    }

    @Test func typingTheCodeFirstRegisters() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "the OTP step asks for the code first:\n\(run.dialog.screen)")
        let codes = try run.server.outbox()
        try run.dialog.answer(try #require(codes.last))
        try Self.registered(run)
        #expect(!run.dialog.screen.contains("warning"), "\(run.dialog.screen)")
        #expect(!run.dialog.screen.contains(codes[0]), "a code is read without echo")
        let otpRequests = try run.server.flowRequests().filter { $0["step"] == .string("otp") }
        #expect(otpRequests.map { $0["actionId"] } == [.string("verify-otp")] && otpRequests.first?["inputs"] == .array([.string("otp")]), "\(otpRequests)")
    }

    @Test func askingToResendFirstSendsASecondCodeThatRegisters() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "\(run.dialog.screen)")
        try run.typeResendThenTheNewCode(notice: "We sent a new code.", prompt: Self.codePrompt)
        try Self.registered(run)
        // The resend sent no code: the server's resend takes none.
        let resend = try run.server.flowRequests().filter { $0["actionId"] == .string("resend-otp") }
        #expect(resend.count == 1 && resend.first?["inputs"] == .array([]), "\(resend)")
    }

    @Test func aWrongCodeShowsTheServersMessageAndAsksAgain() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "\(run.dialog.screen)")
        try run.typeAWrongCodeThenTheRightOne(refusal: "error: The code is incorrect. Try again.", prompt: Self.codePrompt)
        try Self.registered(run)
    }

    /// Enter at the code lists the actions; that list may take the code, so it is read without
    /// echo as the code's prompt is: the code typed there registers and never shows.
    @Test func aCodeTypedAtTheListNeverShows() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "\(run.dialog.screen)")
        try run.dialog.answer("")
        #expect(try run.dialog.nextPrompt() == "[1] Verify  [2] Resend code  (Enter for 1; typing hidden):", "\(run.dialog.screen)")
        let code = try #require(try run.server.outbox().last)
        try run.dialog.answer(code)
        try Self.registered(run)
        #expect(run.dialog.screen.contains("that is not one of the choices: taken as the Verification code"), "\(run.dialog.screen)")
        #expect(!run.dialog.session.output.contains(code), "the terminal showed the code: \(run.dialog.session.output.debugDescription)")
    }
}

/// `devtrust register` at a terminal, terms to sign after the device step (a required Full
/// name, Accept or Decline): typing the name does not accept; the terms are asked for after
/// it, as they are without an input, and Decline sends no input.
@Suite(.enabled(if: TmuxSession.shouldRun && ReferenceServer.shouldRun)) struct RegisterTermsTerminalTests {
    /// `register` at the terms' name, the code typed.
    static func atTheTerms() throws -> AtTheCode {
        let run = try AtTheCode({ ["register", "--server", $0.url] }, server: ["--terms-step", "--terms-signature"], answering: [
            ("Email (required):", "alice@example.com"), ("Password (required, 8 to 64 characters):", "correct horse"),
        ])
        #expect(run.prompt == RegisterOTPTerminalTests.codePrompt, "\(run.dialog.screen)")
        try run.dialog.answer(try #require(try run.server.outbox().last))
        #expect(try run.dialog.nextPrompt() == "Full name (required; Enter for other choices):", "\(run.dialog.screen)")
        try run.dialog.answer("Alice Example")
        #expect(try run.dialog.nextPrompt() == "[1] Accept  [2] Decline  (Enter for 1):", "typing the name is not accepting the terms:\n\(run.dialog.screen)")
        return run
    }

    static func termsRequests(_ run: AtTheCode) throws -> [JSONObject] {
        try run.server.flowRequests().filter { $0["step"] == .string("terms") }
    }

    @Test func declineAfterTheNameSendsNothingAndRegistersNothing() throws {
        let run = try Self.atTheTerms()
        try run.dialog.answer("2")
        #expect(try run.dialog.nextPrompt() == nil, "\(run.dialog.screen)")
        #expect(try run.dialog.exitStatus() == 4, "\(run.dialog.screen)")
        #expect(run.dialog.screen.contains("FE-60010"), "\(run.dialog.screen)")
        #expect(try Self.termsRequests(run) == [["step": .string("terms"), "actionId": .string("decline-terms"), "inputs": .array([])]])
        #expect(try run.server.devices().isEmpty)
    }

    @Test func acceptAfterTheNameSendsItAndRegisters() throws {
        let run = try Self.atTheTerms()
        try run.dialog.answer("")
        try run.finished(saying: "registered: this device is ")
        #expect(try Self.termsRequests(run) == [["step": .string("terms"), "actionId": .string("accept-terms"), "inputs": .array([.string("signature")])]])
        #expect(try run.server.devices().count == 1)
    }
}

/// `devtrust login` at a terminal, app-native, with the reference server's Email OTP (as
/// WSO2's email-otp-authenticator: the username, then the code it mails; `resendCode` mails a
/// new one): the code typed at its prompt signs in; `r` there mails a second code, which signs
/// in; a wrong code shows the server's message and the code is asked for again.
@Suite(.enabled(if: TmuxSession.shouldRun && ReferenceServer.shouldRun)) struct LoginOTPTerminalTests {
    static let codePrompt = "Code (required; r for Resend code):"

    /// `login` at the Email OTP code's prompt, Email OTP chosen and the username typed.
    static func atTheCode() throws -> AtTheCode {
        try AtTheCode({ ["login", "--server", $0.url, "--client-id", "devtrust-app"] }, answering: [
            ("Choose 1-2:", "2"), ("Username (required):", "alice@example.com"),
        ])
    }

    static func signedIn(_ run: AtTheCode) throws {
        try run.finished(saying: "signed in at \(run.server.url)")
    }

    @Test func typingTheCodeSignsIn() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "the code's prompt says how to resend:\n\(run.dialog.screen)")
        let codes = try run.server.outbox()
        #expect(codes.count == 1 && run.dialog.screen.contains("We sent a code to a***@example.com."), "\(codes) \(run.dialog.screen)")
        try run.dialog.answer(try #require(codes.last))
        try Self.signedIn(run)
        #expect(!run.dialog.screen.contains(codes[0]), "a code is read without echo")
    }

    @Test func askingToResendFirstSendsASecondCodeThatSignsIn() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "\(run.dialog.screen)")
        // A new code, and no refusal: the server refuses a resend that carries a code.
        try run.typeResendThenTheNewCode(notice: "We sent a new code to a***@example.com.", prompt: Self.codePrompt)
        try Self.signedIn(run)
    }

    @Test func aWrongCodeShowsTheServersMessageAndAsksAgain() throws {
        let run = try Self.atTheCode()
        #expect(run.prompt == Self.codePrompt, "\(run.dialog.screen)")
        try run.typeAWrongCodeThenTheRightOne(refusal: "error: Authentication failed: check the values and try again.", prompt: Self.codePrompt)
        try Self.signedIn(run)
    }
}
