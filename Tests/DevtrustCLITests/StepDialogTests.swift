@testable import DevtrustCLI
import DevtrustEncoding
import DevtrustFlow
import DevtrustHTTP
import DevtrustSignIn
import DevtrustTestSupport
import Foundation
import Testing

/// How a step is asked for at a terminal when it has several actions (issue 26): its fields
/// first, the action only when what was typed does not say it, the other actions reachable
/// without typing a field; for a flow's VIEW steps (`register`) and app-native code steps
/// (`login`). In-process, the steps as the server sends them, the answers typed on a
/// capturing terminal; the same at a real terminal: RegisterOTPTerminalTests, LoginOTPTerminalTests.
@Suite struct StepDialogTests {
    /// What the user typed, line by line, and what devtrust asked and said.
    final class Typing {
        let terminal: CapturingTerminal
        let context: CommandContext
        private let directory = TemporaryDirectory()

        init(_ lines: [String]) throws {
            terminal = CapturingTerminal(stdin: Array(lines.map { $0 + "\n" }.joined().utf8), inputIsTerminal: true)
            let variables = ["DEVTRUST_KEYSTORE": directory.file("ks"), "XDG_CACHE_HOME": directory.file("cache"), "XDG_CONFIG_HOME": directory.file("config")]
            context = CommandContext(global: GlobalOptions(OptionValues(try CommandSpecs.parser.parse(["status"]))),
                                     environment: CommandEnvironment(variables: variables, terminal: terminal))
        }

        var prompts: [CapturingTerminal.Prompt] { terminal.prompts }
        var said: String { terminal.errors }
    }

    static func step(_ json: String) throws -> FlowStep {
        try FlowStepParser.parse(Array(json.utf8))
    }

    /// `register`'s answer to `step` when the user types `lines` (after `--input` presets).
    static func register(_ step: FlowStep, typing lines: [String], presets: [String: String] = [:]) throws -> (ViewAnswer, Typing) {
        let typing = try Typing(lines)
        let interaction = TerminalFlowInteraction(context: typing.context, presets: presets, interactive: true, openBrowser: false)
        return (try interaction.answer(view: step), typing)
    }

    static func inputs(_ answer: ViewAnswer) -> [String] { answer.inputs.map { "\($0.0)=\($0.1)" } }

    /// The reference server's OTP step (Tests/ReferenceServer: view_otp), as the server sends it.
    static let otpStep = """
        {"flowId":"f1","flowType":"REGISTRATION","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
          {"id":"otp_text","type":"TYPOGRAPHY","variant":"BODY1","config":{"text":"Enter the code we sent to a***@example.com"}},
          {"id":"form_2","type":"FORM","components":[
            {"id":"otp","type":"INPUT","variant":"OTP","config":{"identifier":"otp","label":"Verification code","required":true,
              "validations":[{"type":"RULE","name":"LengthValidator","conditions":[{"key":"min.length","value":"6"},{"key":"max.length","value":"6"}]}]}},
            {"id":"verify","type":"BUTTON","actionId":"verify-otp","variant":"PRIMARY","config":{"text":"Verify"}},
            {"id":"resend","type":"BUTTON","actionId":"resend-otp","variant":"SECONDARY","config":{"text":"Resend code"}}]}],
          "requiredParams":["otp"]}}
        """
    static let codePrompt = CapturingTerminal.Prompt(text: "Verification code (required, 6 characters; r for Resend code): ", isSecret: true)
    static let otpChoice = CapturingTerminal.Prompt(text: "[1] Verify  [2] Resend code  (Enter for 1): ", isSecret: false)

    // MARK: register: the OTP step

    /// The issue's session: the code typed first is the code, and Verify is not asked for.
    @Test func theCodeTypedFirstVerifies() throws {
        let (answer, typing) = try Self.register(try Self.step(Self.otpStep), typing: ["123456"])
        #expect(answer.actionId == "verify-otp" && Self.inputs(answer) == ["otp=123456"])
        #expect(typing.prompts == [Self.codePrompt], "\(typing.prompts)")
        #expect(!typing.said.contains("warning") && !typing.said.contains("123456"), "\(typing.said)")
    }

    /// Resend, typed at the code's prompt in any of its names, resends and sends no code
    /// (the server's resend takes none; a half-typed code is not sent with it).
    @Test(arguments: ["r", "R", "resend", " Resend ", "resend code", "resend-otp"])
    func resendIsTypedAtTheCodesPrompt(typed: String) throws {
        let (answer, typing) = try Self.register(try Self.step(Self.otpStep), typing: [typed])
        #expect(answer.actionId == "resend-otp" && answer.inputs.isEmpty, "\(Self.inputs(answer))")
        #expect(typing.prompts == [Self.codePrompt], "\(typing.prompts)")
    }

    /// Enter at the code lists the actions: Resend from there; Enter (or 1) there asks for the code again.
    @Test func enterAtTheCodeListsTheActions() throws {
        let (resend, listed) = try Self.register(try Self.step(Self.otpStep), typing: ["", "2"])
        #expect(resend.actionId == "resend-otp" && resend.inputs.isEmpty)
        #expect(listed.prompts == [Self.codePrompt, Self.otpChoice], "\(listed.prompts)")
        #expect(!listed.said.contains("is required"), "an empty answer is a way to the other actions, not an error: \(listed.said)")

        let (verify, again) = try Self.register(try Self.step(Self.otpStep), typing: ["", "", "654321"])
        #expect(verify.actionId == "verify-otp" && Self.inputs(verify) == ["otp=654321"])
        #expect(again.prompts == [Self.codePrompt, Self.otpChoice, Self.codePrompt], "\(again.prompts)")
    }

    /// An answer to the list that is no action but a valid code is taken as the code, and said
    /// so (never echoed back); what is not a valid code, or looks like a mistyped number, is asked again.
    @Test func aCodeTypedAtTheListIsTakenAsTheCode() throws {
        let (answer, typing) = try Self.register(try Self.step(Self.otpStep), typing: ["", "3", "12345", "123456"])
        #expect(answer.actionId == "verify-otp" && Self.inputs(answer) == ["otp=123456"], "\(Self.inputs(answer))")
        #expect(typing.prompts == [Self.codePrompt, Self.otpChoice, Self.otpChoice, Self.otpChoice], "\(typing.prompts)")
        let refusals = typing.said.components(separatedBy: "devtrust: warning: choose a number from 1 to 2, or type the Verification code\n").count - 1
        #expect(refusals == 2, "3 is a mistyped choice, 12345 is too short for a code: \(typing.said)")
        #expect(typing.said.contains("that is not one of the choices: taken as the Verification code\n"), "\(typing.said)")
        #expect(!typing.said.contains("123456"), "the code is not printed: \(typing.said)")
    }

    /// After a wrong code the server's message is shown and the code is asked for again, first,
    /// even when a script had given it (a refused value is never sent again unchanged).
    @Test func aRefusedCodeIsAskedForAgainFirst() throws {
        let typing = try Typing(["", "999999"])
        let interaction = TerminalFlowInteraction(context: typing.context, presets: ["otp": "111111"], interactive: true, openBrowser: false)
        let first = try interaction.answer(view: try Self.step(Self.otpStep))
        // Every field given: the action is asked for, as before (Enter: Verify).
        #expect(Self.inputs(first) == ["otp=111111"] && first.actionId == "verify-otp", "\(Self.inputs(first))")
        let refused = Self.otpStep.replacingOccurrences(of: #""requiredParams""#, with: #""messages":[{"type":"ERROR","message":"The code is incorrect. Try again."}],"requiredParams""#)
        let second = try interaction.answer(view: try Self.step(refused))
        #expect(second.actionId == "verify-otp" && Self.inputs(second) == ["otp=999999"], "\(Self.inputs(second))")
        #expect(typing.said.contains("error: The code is incorrect. Try again.\n"))
        #expect(typing.prompts.last == Self.codePrompt, "\(typing.prompts)")
    }

    // MARK: register: other shapes of steps

    /// Two required fields and two actions: both fields first, then the main action without
    /// asking; free-text fields take any word, so the way to the other action is Enter (said
    /// in the prompt), and a stray answer to the list is not guessed to be one of the fields.
    @Test func severalFieldsAreAllAskedFirst() throws {
        let step = try Self.step("""
            {"flowId":"f2","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[{"id":"form","type":"FORM","components":[
              {"id":"email","type":"INPUT","variant":"EMAIL","config":{"identifier":"email","label":"Email","required":true}},
              {"id":"password","type":"INPUT","variant":"PASSWORD","config":{"identifier":"password","label":"Password","required":true}},
              {"id":"signin","type":"BUTTON","actionId":"go-to-sign-in","variant":"SECONDARY","config":{"text":"Sign in instead"}},
              {"id":"submit","type":"BUTTON","actionId":"submit","variant":"PRIMARY","config":{"text":"Continue"}}]}],
              "requiredParams":["email","password"]}}
            """)
        let email = CapturingTerminal.Prompt(text: "Email (required; Enter for other choices): ", isSecret: false)
        let password = CapturingTerminal.Prompt(text: "Password (required; Enter for other choices): ", isSecret: true)
        let list = CapturingTerminal.Prompt(text: "[1] Sign in instead  [2] Continue  (Enter for 2): ", isSecret: false)

        let (main, typed) = try Self.register(step, typing: ["a@example.com", "s3cret-pass"])
        #expect(main.actionId == "submit" && Self.inputs(main) == ["email=a@example.com", "password=s3cret-pass"])
        #expect(typed.prompts == [email, password], "\(typed.prompts)")

        // "s" and "sign" are an email's possible values here: not shortcuts; Enter, then 1.
        let (letter, _) = try Self.register(step, typing: ["s", "pw"])
        #expect(letter.actionId == "submit" && Self.inputs(letter) == ["email=s", "password=pw"])
        let (other, listed) = try Self.register(step, typing: ["", "a@example.com", "1"])
        #expect(other.actionId == "go-to-sign-in" && other.inputs.isEmpty, "\(Self.inputs(other))")
        #expect(listed.prompts == [email, list, list], "\(listed.prompts)")
        #expect(listed.said.contains("devtrust: warning: choose a number from 1 to 2\n"), "two fields: a stray answer is not taken for one: \(listed.said)")

        // Unchanged: one action asks its fields with no hint; a step without fields asks for the action.
        let single = try Self.step(#"""
            {"flowId":"f3","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
              {"id":"email","type":"INPUT","variant":"EMAIL","config":{"identifier":"email","label":"Email","required":true}},
              {"id":"submit","type":"BUTTON","actionId":"submit","variant":"PRIMARY","config":{"text":"Continue"}}]}}
            """#)
        let (one, asked) = try Self.register(single, typing: ["", "a@example.com"])
        #expect(one.actionId == "submit" && Self.inputs(one) == ["email=a@example.com"])
        #expect(asked.prompts == [CapturingTerminal.Prompt(text: "Email (required): ", isSecret: false), CapturingTerminal.Prompt(text: "Email (required): ", isSecret: false)])
        #expect(asked.said.contains("devtrust: warning: Email is required"))
        let terms = try Self.step(#"""
            {"flowId":"f4","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
              {"id":"accept","type":"BUTTON","actionId":"accept-terms","variant":"PRIMARY","config":{"text":"Accept"}},
              {"id":"decline","type":"BUTTON","actionId":"decline-terms","variant":"SECONDARY","config":{"text":"Decline"}}]}}
            """#)
        let (declined, choice) = try Self.register(terms, typing: ["2"])
        #expect(declined.actionId == "decline-terms" && choice.prompts == [CapturingTerminal.Prompt(text: "[1] Accept  [2] Decline  (Enter for 1): ", isSecret: false)])
    }

    /// No required field: the optional one first; a value typed means the main action; nothing
    /// typed leaves it open, so the action is asked for then.
    @Test func optionalFieldsComeFirstAndTheActionIsAskedWhenNothingWasTyped() throws {
        let step = try Self.step("""
            {"flowId":"f5","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
              {"id":"nick","type":"INPUT","variant":"TEXT","config":{"identifier":"nickname","label":"Nickname","required":false}},
              {"id":"save","type":"BUTTON","actionId":"save","variant":"PRIMARY","config":{"text":"Save"}},
              {"id":"skip","type":"BUTTON","actionId":"skip","variant":"SECONDARY","config":{"text":"Skip"}}]}}
            """)
        let nickname = CapturingTerminal.Prompt(text: "Nickname (optional): ", isSecret: false)
        let list = CapturingTerminal.Prompt(text: "[1] Save  [2] Skip  (Enter for 1): ", isSecret: false)
        let (saved, typed) = try Self.register(step, typing: ["bob"])
        #expect(saved.actionId == "save" && Self.inputs(saved) == ["nickname=bob"] && typed.prompts == [nickname], "\(typed.prompts)")
        let (skipped, asked) = try Self.register(step, typing: ["", "2"])
        #expect(skipped.actionId == "skip" && skipped.inputs.isEmpty && asked.prompts == [nickname, list], "\(asked.prompts)")
        let (empty, _) = try Self.register(step, typing: ["", ""])
        #expect(empty.actionId == "save" && empty.inputs.isEmpty)
    }

    /// A password typed at the list (the step's only required field) is taken, never printed,
    /// and the user is told the terminal showed it; the password's own prompt never echoes.
    @Test func aPasswordTypedAtTheListIsTakenAndTheEchoIsSaid() throws {
        let step = try Self.step("""
            {"flowId":"f6","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
              {"id":"pw","type":"INPUT","variant":"PASSWORD","config":{"identifier":"password","label":"Password","required":true,
                "validations":[{"type":"RULE","name":"LengthValidator","conditions":[{"key":"min.length","value":"8"}]}]}},
              {"id":"go","type":"BUTTON","actionId":"continue","variant":"PRIMARY","config":{"text":"Continue"}},
              {"id":"forgot","type":"BUTTON","actionId":"forgot-password","variant":"SECONDARY","config":{"text":"Forgot password"}}]}}
            """)
        let (answer, typing) = try Self.register(step, typing: ["", "correct horse"])
        #expect(answer.actionId == "continue" && Self.inputs(answer) == ["password=correct horse"])
        #expect(typing.prompts == [CapturingTerminal.Prompt(text: "Password (required, at least 8 characters; f for Forgot password): ", isSecret: true),
                                   CapturingTerminal.Prompt(text: "[1] Continue  [2] Forgot password  (Enter for 1): ", isSecret: false)], "\(typing.prompts)")
        #expect(typing.said.contains("taken as the Password (the terminal showed it as you typed it)") && !typing.said.contains("correct horse"), "\(typing.said)")
    }

    // MARK: login: app-native code steps

    static func authenticator(_ json: String) throws -> AppNativeAuthenticator {
        let body = #"{"flowId":"s1","flowStatus":"INCOMPLETE","nextStep":{"stepType":"AUTHENTICATOR_PROMPT","authenticators":["# + json + "]}}"
        return try #require(try AppNativeStep(response: HTTPResponse(status: 200, headers: [], body: Array(body.utf8))).authenticators.first)
    }

    /// WSO2's Email OTP code step (email-otp-authenticator, its OTPCode param).
    static let emailCode = """
        {"authenticatorId":"\(Base64.encode(Array("email-otp-authenticator:LOCAL".utf8)))","authenticator":"Email OTP","idp":"LOCAL",
         "metadata":{"promptType":"USER_PROMPT","params":[{"param":"OTPCode","type":"STRING","order":1,"displayName":"Code","confidential":true}]},
         "requiredParams":["OTPCode"]}
        """

    static func login(_ authenticator: AppNativeAuthenticator, typing lines: [String], failed: Bool = false) throws -> ([String], Typing) {
        let typing = try Typing(lines)
        let interaction = TerminalSignInInteraction(context: typing.context, presets: [:], authenticator: nil, interactive: true)
        let values = try interaction.values(for: authenticator, messages: [], failed: failed)
        return (values.map { "\($0.0)=\($0.1)" }, typing)
    }

    /// The code first; `r` at its prompt resends (resendCode=true and no code, as the server
    /// wants it); Enter lists Verify and Resend code, where a code typed is taken as the code.
    @Test func anEmailOTPCodeIsAskedFirstWithResendAtItsPrompt() throws {
        let email = try Self.authenticator(Self.emailCode)
        let code = CapturingTerminal.Prompt(text: "Code (required; r for Resend code): ", isSecret: true)
        let list = CapturingTerminal.Prompt(text: "[1] Verify  [2] Resend code  (Enter for 1): ", isSecret: false)
        let (typed, asked) = try Self.login(email, typing: ["123456"])
        #expect(typed == ["OTPCode=123456"] && asked.prompts == [code], "\(typed) \(asked.prompts)")
        for word in ["r", "resend"] {
            let (resend, _) = try Self.login(email, typing: [word])
            #expect(resend == ["resendCode=true"], "\(word): \(resend)")
        }
        let (listed, viaList) = try Self.login(email, typing: ["", "2"])
        #expect(listed == ["resendCode=true"] && viaList.prompts == [code, list], "\(viaList.prompts)")
        let (stray, strayTyping) = try Self.login(email, typing: ["", "654321"])
        #expect(stray == ["OTPCode=654321"] && strayTyping.said.contains("taken as the Code") && !strayTyping.said.contains("654321"), "\(strayTyping.said)")
        // After a refused code: the code again, first.
        let (again, _) = try Self.login(email, typing: ["222222"], failed: true)
        #expect(again == ["OTPCode=222222"])

        // The username step of the same authenticator, and TOTP: nothing to resend, prompts as they were.
        let (username, plain) = try Self.login(try Self.authenticator(Self.emailCode.replacingOccurrences(
            of: #"{"param":"OTPCode","type":"STRING","order":1,"displayName":"Code","confidential":true}"#,
            with: #"{"param":"username","type":"STRING","order":0,"displayName":"Username","confidential":false}"#)), typing: ["alice@example.com"])
        #expect(username == ["username=alice@example.com"] && plain.prompts == [CapturingTerminal.Prompt(text: "Username (required): ", isSecret: false)])
        let totp = try Self.authenticator("""
            {"authenticatorId":"\(Base64.encode(Array("totp:LOCAL".utf8)))","authenticator":"TOTP","idp":"LOCAL",
             "metadata":{"promptType":"USER_PROMPT","params":[{"param":"token","type":"STRING","order":0,"displayName":"Authenticator app code","isConfidential":true}]}}
            """)
        let (token, totpTyping) = try Self.login(totp, typing: ["r", "123456"])
        #expect(token == ["token=r"] && totpTyping.prompts == [CapturingTerminal.Prompt(text: "Authenticator app code (required): ", isSecret: true)],
                "TOTP has no resend: \(token) \(totpTyping.prompts)")
    }
}
