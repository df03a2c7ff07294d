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
    /// The list after Enter at the code: read without echo, as the code it may take (a code typed there is the code).
    static let otpChoice = CapturingTerminal.Prompt(text: "[1] Verify  [2] Resend code  (Enter for 1; typing hidden): ", isSecret: true)

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
    /// so (never echoed back); a small number is a mistyped choice; a code the rules refuse is
    /// asked again, saying the rule.
    @Test func aCodeTypedAtTheListIsTakenAsTheCode() throws {
        let (answer, typing) = try Self.register(try Self.step(Self.otpStep), typing: ["", "3", "12345", "123456"])
        #expect(answer.actionId == "verify-otp" && Self.inputs(answer) == ["otp=123456"], "\(Self.inputs(answer))")
        #expect(typing.prompts == [Self.codePrompt, Self.otpChoice, Self.otpChoice, Self.otpChoice], "\(typing.prompts)")
        #expect(typing.said.contains("devtrust: warning: choose a number from 1 to 2, or type the Verification code\n"), "3 is a choice mistyped: \(typing.said)")
        #expect(typing.said.contains("devtrust: warning: choose a number from 1 to 2, or type the Verification code: it must be 6 characters long\n"),
                "12345 is a code too short, and the warning says the rule: \(typing.said)")
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

    /// The password step of the review (at least 8 characters; Continue, Forgot password, Back).
    static let passwordStep = """
        {"flowId":"f6","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
          {"id":"pw","type":"INPUT","variant":"PASSWORD","config":{"identifier":"password","label":"Password","required":true,
            "validations":[{"type":"RULE","name":"LengthValidator","conditions":[{"key":"min.length","value":"8"}]}]}},
          {"id":"go","type":"BUTTON","actionId":"continue","variant":"PRIMARY","config":{"text":"Continue"}},
          {"id":"forgot","type":"BUTTON","actionId":"forgot-password","variant":"SECONDARY","config":{"text":"Forgot password"}},
          {"id":"back","type":"BUTTON","actionId":"back","variant":"SECONDARY","config":{"text":"Back"}}]}}
        """
    static let passwordPrompt = CapturingTerminal.Prompt(text: "Password (required, at least 8 characters; f for Forgot password, b for Back): ", isSecret: true)
    static let passwordChoice = CapturingTerminal.Prompt(text: "[1] Continue  [2] Forgot password  [3] Back  (Enter for 1; typing hidden): ", isSecret: true)

    /// A password typed at the list (the step's only required field) never shows: the list that
    /// may take it is read without echo, as the password's prompt is; what is taken is said,
    /// never printed. A value the rules refuse is asked again with the rule.
    @Test func aPasswordTypedAtTheListIsNeverShown() throws {
        let (answer, typing) = try Self.register(try Self.step(Self.passwordStep), typing: ["", "abc", "hunter2hunter2"])
        #expect(answer.actionId == "continue" && Self.inputs(answer) == ["password=hunter2hunter2"])
        #expect(typing.prompts == [Self.passwordPrompt, Self.passwordChoice, Self.passwordChoice], "\(typing.prompts)")
        #expect(typing.said.contains("devtrust: warning: choose a number from 1 to 3, or type the Password: it must be at least 8 characters long\n"), "\(typing.said)")
        #expect(typing.said.contains("that is not one of the choices: taken as the Password\n") && !typing.said.contains("hunter2"), "\(typing.said)")
        // The other actions from the hidden list, by number or name.
        let (back, _) = try Self.register(try Self.step(Self.passwordStep), typing: ["", "3"])
        #expect(back.actionId == "back" && back.inputs.isEmpty)
        let (forgot, _) = try Self.register(try Self.step(Self.passwordStep), typing: ["", "forgot password"])
        #expect(forgot.actionId == "forgot-password" && forgot.inputs.isEmpty)
        // A list that takes no secret is read as before, with echo.
        let (skipped, plain) = try Self.register(try Self.step(Self.passwordStep.replacingOccurrences(of: #""required":true"#, with: #""required":false"#)), typing: ["", "3"])
        #expect(skipped.actionId == "back" && plain.prompts.last == CapturingTerminal.Prompt(text: "[1] Continue  [2] Forgot password  [3] Back  (Enter for 1): ", isSecret: false),
                "\(plain.prompts)")
    }

    // MARK: register: acceptances, rules, numbers, presets

    /// Terms to sign: a required "Full name" and Accept (the main action) or Decline.
    static let signedTerms = """
        {"flowId":"f7","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[
          {"id":"terms","type":"RICH_TEXT","config":{"text":"<p>Accept the policy.</p>"}},
          {"id":"form","type":"FORM","components":[
            {"id":"sig","type":"INPUT","variant":"TEXT","config":{"identifier":"signature","label":"Full name","required":true}},
            {"id":"accept","type":"BUTTON","actionId":"accept-terms","variant":"PRIMARY","config":{"text":"Accept"}},
            {"id":"decline","type":"BUTTON","actionId":"decline-terms","variant":"SECONDARY","config":{"text":"Decline"}}]}],
          "requiredParams":["signature"]}}
        """

    /// Typing a step's input never accepts on the user's behalf: when the main action accepts
    /// something (terms, consent), it is asked for after the inputs, as on main, and Decline
    /// there sends none of them.
    @Test func anAcceptanceIsAskedForAfterItsInputs() throws {
        let name = CapturingTerminal.Prompt(text: "Full name (required; Enter for other choices): ", isSecret: false)
        let list = CapturingTerminal.Prompt(text: "[1] Accept  [2] Decline  (Enter for 1): ", isSecret: false)
        let (declined, asked) = try Self.register(try Self.step(Self.signedTerms), typing: ["Alice Example", "2"])
        #expect(declined.actionId == "decline-terms" && declined.inputs.isEmpty, "\(declined.actionId ?? "-") \(Self.inputs(declined))")
        #expect(asked.prompts == [name, list], "\(asked.prompts)")
        let (accepted, _) = try Self.register(try Self.step(Self.signedTerms), typing: ["Alice Example", ""])
        #expect(accepted.actionId == "accept-terms" && Self.inputs(accepted) == ["signature=Alice Example"])
        // An optional input typed: the same.
        let optional = Self.signedTerms.replacingOccurrences(of: #""required":true"#, with: #""required":false"#)
        let (typed, optionalAsked) = try Self.register(try Self.step(optional), typing: ["Alice Example", "decline"])
        #expect(typed.actionId == "decline-terms" && typed.inputs.isEmpty, "\(typed.actionId ?? "-")")
        #expect(optionalAsked.prompts == [CapturingTerminal.Prompt(text: "Full name (optional): ", isSecret: false), list], "\(optionalAsked.prompts)")
        // Enter, the name at the list (taken as it), and still the question.
        let (viaList, listed) = try Self.register(try Self.step(Self.signedTerms), typing: ["", "Alice Example", "1"])
        #expect(viaList.actionId == "accept-terms" && Self.inputs(viaList) == ["signature=Alice Example"])
        #expect(listed.prompts == [name, list, list], "\(listed.prompts)")
    }

    /// At a code's prompt the name of a choice is never sent as the code (a wrong code uses up
    /// an attempt): the main action's words are refused, the others' choose them.
    @Test func aCodesPromptNeverSendsAChoicesName() throws {
        let (answer, typing) = try Self.register(try Self.step(Self.otpStep), typing: ["verify", "Verify", "123456"])
        #expect(answer.actionId == "verify-otp" && Self.inputs(answer) == ["otp=123456"], "\(Self.inputs(answer))")
        #expect(typing.prompts == [Self.codePrompt, Self.codePrompt, Self.codePrompt], "\(typing.prompts)")
        #expect(typing.said.contains("devtrust: warning: Verification code cannot be \"verify\": that names a choice (Enter lists the choices)\n"), "\(typing.said)")

        let email = try Self.authenticator(Self.emailCode)
        let (code, login) = try Self.login(email, typing: ["v", "verify", "123456"])
        #expect(code == ["OTPCode=123456"], "\(code)")
        #expect(login.said.contains("devtrust: warning: Code cannot be \"v\": that names a choice (Enter lists the choices)\n"), "\(login.said)")
    }

    /// A step with one required `input` (its JSON), Continue (the main action) and `other`.
    static func step(asking input: String, or other: (id: String, text: String)) throws -> FlowStep {
        try step("""
            {"flowId":"f8","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[{"id":"form","type":"FORM","components":[\(input),
              {"id":"go","type":"BUTTON","actionId":"continue","variant":"PRIMARY","config":{"text":"Continue"}},
              {"id":"\(other.id)","type":"BUTTON","actionId":"\(other.id)","variant":"SECONDARY","config":{"text":"\(other.text)"}}]}]}}
            """)
    }

    /// Where the field's rules take a value as it was typed, it is that value, even when the
    /// same word in another case names a choice (`r` for Restart, `R` a valid initial).
    @Test func whatTheRulesTakeAsTypedIsAValue() throws {
        let step = try Self.step(asking: #"""
            {"id":"initial","type":"INPUT","variant":"TEXT","config":{"identifier":"initial","label":"Initial","required":true,
              "validations":[{"type":"RULE","name":"RegexValidator","conditions":[{"key":"regex","value":"^[A-Z]$"}]}]}}
            """#, or: ("restart", "Restart"))
        let (value, typing) = try Self.register(step, typing: ["R"])
        #expect(value.actionId == "continue" && Self.inputs(value) == ["initial=R"], "\(value.actionId ?? "-") \(Self.inputs(value))")
        #expect(typing.prompts == [CapturingTerminal.Prompt(text: "Initial (required, matching ^[A-Z]$; r for Restart): ", isSecret: false)], "\(typing.prompts)")
        let (restart, _) = try Self.register(step, typing: ["r"])
        #expect(restart.actionId == "restart" && restart.inputs.isEmpty)
    }

    /// At a number's prompt a number is the number, even when a choice's name starts with it.
    @Test func aNumberAtANumbersPromptIsTheNumber() throws {
        let step = try Self.step(asking: #"{"id":"seats","type":"INPUT","variant":"NUMBER","config":{"identifier":"seats","label":"Seats","required":true}}"#,
                                 or: ("more", "2 more options"))
        let (number, typing) = try Self.register(step, typing: ["2"])
        #expect(number.actionId == "continue" && Self.inputs(number) == ["seats=2"], "\(number.actionId ?? "-") \(Self.inputs(number))")
        #expect(typing.prompts == [CapturingTerminal.Prompt(text: "Seats (required; more for 2 more options): ", isSecret: false)], "\(typing.prompts)")
        let (more, _) = try Self.register(step, typing: ["more"])
        #expect(more.actionId == "more" && more.inputs.isEmpty)
    }

    /// Two other actions that share a word: neither is chosen by it, each by its own.
    @Test func aWordTwoActionsShareChoosesNeither() throws {
        let step = try Self.step(Self.otpStep.replacingOccurrences(of: #"{"id":"resend""#, with: #"""
            {"id":"restart","type":"BUTTON","actionId":"restart","variant":"SECONDARY","config":{"text":"Restart"}},{"id":"resend"
            """#))
        let (answer, typing) = try Self.register(step, typing: ["r", "restart"])
        #expect(answer.actionId == "restart" && answer.inputs.isEmpty, "\(answer.actionId ?? "-")")
        #expect(typing.prompts == [CapturingTerminal.Prompt(text: "Verification code (required, 6 characters; restart for Restart, resend for Resend code): ", isSecret: true),
                                   CapturingTerminal.Prompt(text: "Verification code (required, 6 characters; restart for Restart, resend for Resend code): ", isSecret: true)],
                "\(typing.prompts)")
        #expect(typing.said.contains("devtrust: warning: Verification code cannot be \"r\": that names a choice (Enter lists the choices)\n"), "\(typing.said)")
        let (resend, _) = try Self.register(step, typing: ["resend"])
        #expect(resend.actionId == "resend-otp")
    }

    /// Another action sends none of the step's inputs, not even what a script gave; after it the
    /// step's one-time code given up front is not sent again (the server sent a new one).
    @Test func anotherActionSendsNoInputAndDropsAGivenCode() throws {
        let typing = try Typing(["2", "654321"])
        let interaction = TerminalFlowInteraction(context: typing.context, presets: ["otp": "111111"], interactive: true, openBrowser: false)
        let resend = try interaction.answer(view: try Self.step(Self.otpStep))
        #expect(resend.actionId == "resend-otp" && resend.inputs.isEmpty, "the stale code went with the resend: \(Self.inputs(resend))")
        let resent = Self.otpStep.replacingOccurrences(of: #""requiredParams""#, with: #""messages":[{"type":"INFO","message":"We sent a new code."}],"requiredParams""#)
        let verify = try interaction.answer(view: try Self.step(resent))
        #expect(verify.actionId == "verify-otp" && Self.inputs(verify) == ["otp=654321"], "\(Self.inputs(verify))")
        #expect(typing.prompts == [CapturingTerminal.Prompt(text: "[1] Verify  [2] Resend code  (Enter for 1): ", isSecret: false), Self.codePrompt], "\(typing.prompts)")
    }

    /// `--input actionId=ID` answers one step, the first that offers the action: a resend given
    /// so is not repeated at every step, and the code given is not sent for the new one.
    @Test func anActionGivenUpFrontIsTakenOnce() throws {
        let typing = try Typing([])
        let interaction = TerminalFlowInteraction(context: typing.context, presets: ["actionId": "resend-otp", "otp": "111111"], interactive: false, openBrowser: false)
        let resend = try interaction.answer(view: try Self.step(Self.otpStep))
        #expect(resend.actionId == "resend-otp" && resend.inputs.isEmpty, "\(Self.inputs(resend))")
        let resent = Self.otpStep.replacingOccurrences(of: #""requiredParams""#, with: #""messages":[{"type":"INFO","message":"We sent a new code."}],"requiredParams""#)
        #expect(throws: MissingFlowInputsError(inputs: [("otp", "Verification code")], stepText: ["Enter the code we sent to a***@example.com"])) {
            try interaction.answer(view: try Self.step(resent))
        }
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
        let list = CapturingTerminal.Prompt(text: "[1] Verify  [2] Resend code  (Enter for 1; typing hidden): ", isSecret: true)
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

    /// At the list, only what looks like a code (letters and digits, a digit among them) is
    /// taken for a code that has no rules (WSO2's Email OTP): a word is not sent as the code, a
    /// small number (one or two digits, no leading zero) is a choice mistyped, and a code is
    /// read by its text (000042 is a code, not 42).
    @Test func atTheListOnlyWhatLooksLikeACodeIsTakenForIt() throws {
        let email = try Self.authenticator(Self.emailCode)
        let (code, typing) = try Self.login(email, typing: ["", "abc", "3", "99", "000042"])
        #expect(code == ["OTPCode=000042"], "\(code)")
        let refusals = typing.said.components(separatedBy: "devtrust: warning: choose a number from 1 to 2, or type the Code\n").count - 1
        #expect(refusals == 3, "abc is no code, 3 and 99 are choices mistyped: \(typing.said)")
        #expect(typing.said.contains("taken as the Code") && !typing.said.contains("000042"), "\(typing.said)")
        let (longer, _) = try Self.login(email, typing: ["", "100"])
        #expect(longer == ["OTPCode=100"], "three digits are a code: \(longer)")
    }

    // MARK: the guide

    /// docs/usage.md's "Steps with several buttons" shows the prompts devtrust asks, word for
    /// word: for the reference server's code, the password step and the signed terms above.
    @Test func theGuideShowsThePromptsAsked() throws {
        let guide = try String(contentsOfFile: Repository.path("docs/usage.md"), encoding: .utf8)
        let lines = guide.split(separator: "\n", omittingEmptySubsequences: false)
        let heading = try #require(lines.firstIndex(of: "### Steps with several buttons"), "the guide has no section \"Steps with several buttons\"")
        let block = try #require(MarkdownGuide(guide).blocks.first { $0.line > heading + 1 }, "no example in the section")
        var asked = [CapturingTerminal.Prompt]()
        for (json, lines) in [(Self.otpStep, ["", "2"]), (Self.passwordStep, ["", "3"]), (Self.signedTerms, ["Alice Example", "2"])] {
            asked += try Self.register(try Self.step(json), typing: lines).1.prompts
        }
        #expect(block.lines.count == 5, "\(block.lines)")
        for line in block.lines {
            #expect(asked.contains { $0.text == line + " " }, "the guide shows a prompt devtrust does not ask: \(line)\nasked: \(asked.map(\.text))")
        }
    }
}
