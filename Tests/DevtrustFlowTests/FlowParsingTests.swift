@testable import DevtrustFlow
import DevtrustHTTP
import Testing

@Suite struct FlowParsingTests {
    @Test func parsesTheContractExample() throws {
        let text = #"""
        {"flowId":"c8e06de8-7123-44ac-8209-02be5b55387e","flowType":"REGISTRATION",
         "flowStatus":"INCOMPLETE","type":"VIEW",
         "data":{"components":[{"id":"form_1","type":"FORM","components":[
           {"id":"email","type":"INPUT","variant":"EMAIL",
            "config":{"identifier":"http://wso2.com/claims/emailaddress","label":"Email","required":true}},
           {"id":"password","type":"INPUT","variant":"PASSWORD",
            "config":{"identifier":"password","label":"Password","required":true}},
           {"id":"submit","type":"BUTTON","actionId":"submit-registration","variant":"PRIMARY",
            "config":{"text":"Continue"}}]}],
          "requiredParams":["http://wso2.com/claims/emailaddress","password"]}}
        """#
        let step = try FlowStepParser.parse(Array(text.utf8))
        #expect(step.status == .incomplete && step.type == "VIEW" && step.flowType == "REGISTRATION")
        #expect(step.inputs.map(\.identifier) == ["http://wso2.com/claims/emailaddress", "password"])
        #expect(step.inputs[1].isSecret && !step.inputs[0].isSecret)
        #expect(step.buttons.map(\.actionId) == ["submit-registration"])
        #expect(step.requiredParams.count == 2)
    }

    @Test func acceptsBothRedirectSpellingsAndTheDeviceStep() throws {
        let redirect = try FlowStepParser.parse(Array(#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"REDIRECTION","data":{"url":"https://idp/x"}}"#.utf8))
        #expect(redirect.redirectURL == "https://idp/x")
        let device = try FlowStepParser.parse(Array(#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"INTERNAL_PROMPT","data":{"requiredParams":["publicKey","signature","deviceData"],"additionalData":{"registrationId":"74070bae-df8c-42bf-8754-5173c237c936","challenge":"q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"}}}"#.utf8))
        #expect(device.additionalData["challenge"] == "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y")
        #expect(device.requiredParams == ["publicKey", "signature", "deviceData"])
    }

    @Test(arguments: [
        (#"{"flowStatus":"INCOMPLETE","type":"VIEW"}"#, "missing required field \"flowId\""),
        (#"{"flowId":"f","flowStatus":"DONE"}"#, "unknown flowStatus \"DONE\""),
        (#"{"flowId":"f","flowStatus":"INCOMPLETE"}"#, "an INCOMPLETE step has no type"),
        (#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"VIEW","data":{"requiredParams":[1]}}"#, "field \"data.requiredParams[0]\" must be a string"),
        (#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"VIEW","data":{"additionalData":{"challenge":5}}}"#, "field \"data.additionalData.challenge\" must be a string"),
        (#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"VIEW","data":{"components":[{"id":"x"}]}}"#, "missing required field \"data.components[0].type\""),
        (#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"VIEW","data":{"messages":[{"type":"ERROR","message":7}]}}"#, "field \"data.messages[0].message\" must be a string"),
        ("<html>", "the answer is not JSON"),
    ])
    func malformedAnswersNameTheField(text: String, message: String) {
        do {
            _ = try FlowStepParser.parse(Array(text.utf8))
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    /// A message may carry only its i18nKey (the UI looks the text up): the key is what is shown;
    /// one with neither is left out. Neither stops the flow.
    @Test func aMessageWithoutTextShowsItsKey() throws {
        let step = try FlowStepParser.parse(Array(#"{"flowId":"f","flowStatus":"INCOMPLETE","type":"VIEW","data":{"messages":[{"type":"ERROR","i18nKey":"otp.invalid"},{"type":"INFO"},{"type":"INFO","message":"Sent"}]}}"#.utf8))
        #expect(step.messages.map(\.message) == ["otp.invalid", "Sent"])
    }

    @Test func validationsExplainTheirRule() {
        let length = FlowValidation(name: "LengthValidator", conditions: ["min.length": "8", "max.length": "64"])
        #expect(length.problem(with: "short") == "must be 8 to 64 characters long")
        #expect(length.problem(with: "long enough") == nil)
        #expect(length.explanation == "8 to 64 characters")
        // A fixed length is said as the prompt says it (not "6 to 6").
        let code = FlowValidation(name: "LengthValidator", conditions: ["min.length": "6", "max.length": "6"])
        #expect(code.problem(with: "12345") == "must be 6 characters long" && code.problem(with: "1234567") == "must be 6 characters long")
        #expect(FlowValidation(name: "LengthValidator", conditions: ["max.length": "4"]).problem(with: "12345") == "must be at most 4 characters long")
        let digits = FlowValidation(name: "RegexValidator", conditions: ["regex": "[0-9]{6}"])
        #expect(digits.problem(with: "12345a") == "must match the pattern [0-9]{6}")
        #expect(digits.problem(with: "123456") == nil)
        // Java-only syntax is left to the server rather than misjudged here.
        #expect(FlowValidation(name: "RegexValidator", conditions: ["regex": "\\d{6}"]).problem(with: "123456") == nil)
    }

    @Test func serverURLsAreNormalisedAndPlainHTTPOnlyToLoopback() throws {
        #expect(try ServerURL("https://API.asgardeo.io/t/acme/").description == "https://api.asgardeo.io/t/acme")
        #expect(try ServerURL("http://127.0.0.1:9443").appending("/api/x") == "http://127.0.0.1:9443/api/x")
        #expect(try ServerURL("http://localhost:8080").isLoopback)
        #expect(try ServerURL("http://[::1]:8080").isLoopback)
        for (text, problem) in [("http://10.0.0.1", "plain http"), ("https://user:pw@host", "user names"), ("https://host:99999", "bad port"),
                                ("api.asgardeo.io", "scheme"), ("https://host/a?b=c", "query"), ("https://", "host"), ("https://h o/x", "host")] {
            #expect(throws: HTTPError.self, "\(text) should fail: \(problem)") { try ServerURL(text) }
        }
    }
}
