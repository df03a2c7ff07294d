import DevtrustEncoding
import DevtrustFlow
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeys
import DevtrustTestSupport
import Testing

/// The reference server is only useful if it is as strict as the real one:
/// each wrong answer to the device step is refused with the real error code.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct ReferenceServerStrictnessTests {
    static let email = "http://wso2.com/claims/emailaddress"

    struct DeviceStep {
        let client: FlowClient
        let step: FlowStep
        var challenge: [UInt8] { try! Base64URL.decode(step.additionalData["challenge"]!, padding: .optional) }
    }

    /// Walks a fresh flow to its device step.
    static func deviceStep(_ server: ReferenceServer) throws -> DeviceStep {
        let client = FlowClient(server: try ServerURL(server.url), http: CurlHTTPClient(options: HTTPOptions(userAgent: "devtrust-test")))
        var step = try client.start(flowType: "REGISTRATION", applicationId: nil)
        step = try client.proceed(flowId: step.flowId, actionId: "submit-registration", inputs: [(email, "a@example.com"), ("password", "long enough")])
        step = try client.proceed(flowId: step.flowId, actionId: "verify-otp", inputs: [("otp", "123456")])
        #expect(step.type == "INTERNAL_PROMPT")
        return DeviceStep(client: client, step: step)
    }

    static func refusal(_ step: DeviceStep, _ inputs: [(String, String)]) -> FlowServerError? {
        do {
            _ = try step.client.proceed(flowId: step.step.flowId, actionId: nil, inputs: inputs)
            return nil
        } catch {
            return error as? FlowServerError
        }
    }

    static func deviceData(_ key: SoftwareDeviceKey, clock: any Clock = SystemClock(), random: any RandomSource = SystemRandom(), extra: JSONObject = [:]) throws -> String {
        var attributes = DeviceAttributes()
        for member in extra.members { attributes.set(member.key, member.value.stringValue ?? "") }
        return try DeviceTokenMinter(key: key, clock: clock, random: random).deviceData(attributes: attributes)
    }

    @Test func refusesWhatTheServerRefuses() throws {
        let server = try ReferenceServer(["--device-policy"])
        // A key whose base64 SPKI has a '+' or '/', so that its url-safe form differs.
        var key = try SoftwareDeviceKey.generate()
        while !key.publicKey.spkiBase64.contains(where: { $0 == "+" || $0 == "/" }) { key = try SoftwareDeviceKey.generate() }
        let step = try Self.deviceStep(server)
        let publicKey = key.publicKey.spkiBase64
        let signature = Base64.encode(try key.sign(message: step.challenge).der)

        // url-safe base64, or unpadded, for publicKey.
        let urlSafe = Base64.encode(key.publicKey.spki, alphabet: .url, padded: true)
        #expect(Self.refusal(step, [("publicKey", urlSafe), ("signature", signature), ("deviceData", try Self.deviceData(key))])?.code == "DR-60002")
        let unpadded = String(publicKey.prefix(while: { $0 != "=" }))
        #expect(unpadded != publicKey)
        #expect(Self.refusal(step, [("publicKey", unpadded), ("signature", signature), ("deviceData", try Self.deviceData(key))])?.code == "DR-60002")
        // A signature over the base64 text rather than the decoded challenge.
        let overText = Base64.encode(try key.sign(message: Array(step.step.additionalData["challenge"]!.utf8)).der)
        #expect(Self.refusal(step, [("publicKey", publicKey), ("signature", overText), ("deviceData", try Self.deviceData(key))])?.code == "DR-60002")
        // A raw r||s where DER is expected.
        let raw = Base64.encode(try key.sign(message: step.challenge).raw)
        #expect(Self.refusal(step, [("publicKey", publicKey), ("signature", raw), ("deviceData", try Self.deviceData(key))])?.code == "DR-60002")
        // A DER signature inside the deviceData JWS.
        let header = Base64URL.encode(Array(#"{"alg":"ES256","typ":"JWT"}"#.utf8))
        let claims = Base64URL.encode(JSONWriter.bytes(.object(["jti": .string("der-inside"), "iat": .integer(SystemClock().secondsSinceEpoch())])))
        let derJWS = header + "." + claims + "." + Base64URL.encode(try key.sign(message: Array((header + "." + claims).utf8)).der)
        let derRefusal = Self.refusal(step, [("publicKey", publicKey), ("signature", signature), ("deviceData", derJWS)])
        #expect(derRefusal?.code == "DR-60002" && (derRefusal?.serverDescription ?? "").contains("64 bytes"), "\(String(describing: derRefusal))")
        // A nested claims object.
        let nested = try CompactJWS.sign(header: ["alg": .string("ES256")], payload: [
            "jti": .string("nested-1"), "iat": .integer(SystemClock().secondsSinceEpoch()), "device": .object(["lockScreen": .string("true")]),
        ], with: key)
        let nestedRefusal = Self.refusal(step, [("publicKey", publicKey), ("signature", signature), ("deviceData", nested)])
        #expect(nestedRefusal?.code == "DR-60004" && (nestedRefusal?.serverDescription ?? "").contains("nested: device"), "\(String(describing: nestedRefusal))")
        // A stale iat (six minutes ago) and one too far ahead.
        let now = SystemClock().secondsSinceEpoch()
        let stale = try Self.deviceData(key, clock: FixedClock(seconds: now - 360))
        #expect(Self.refusal(step, [("publicKey", publicKey), ("signature", signature), ("deviceData", stale)])?.serverDescription?.contains("old") == true)
        let future = try Self.deviceData(key, clock: FixedClock(seconds: now + 60))
        #expect(Self.refusal(step, [("publicKey", publicKey), ("signature", signature), ("deviceData", future)])?.serverDescription?.contains("future") == true)
        // Missing deviceData under a device policy, an empty field.
        #expect(Self.refusal(step, [("publicKey", publicKey), ("signature", signature)])?.code == "DR-60005")
        #expect(Self.refusal(step, [("publicKey", ""), ("signature", signature), ("deviceData", try Self.deviceData(key))])?.code == "DM-60002")

        // A correct answer completes the flow; the same deviceData (jti) in a second flow is a replay.
        let good = try Self.deviceData(key)
        let done = try step.client.proceed(flowId: step.step.flowId, actionId: nil, inputs: [("publicKey", publicKey), ("signature", signature), ("deviceData", good)])
        #expect(done.status == .complete)
        let second = try Self.deviceStep(server)
        let secondSignature = Base64.encode(try key.sign(message: second.challenge).der)
        let replay = Self.refusal(second, [("publicKey", publicKey), ("signature", secondSignature), ("deviceData", good)])
        #expect(replay?.code == "DR-60002" && (replay?.serverDescription ?? "").contains("already used"), "\(String(describing: replay))")
        #expect(try server.devices().count == 1)
    }

    @Test func aP384KeyIsRefused() throws {
        let server = try ReferenceServer()
        let step = try Self.deviceStep(server)
        guard ExternalTool.openssl.isInstalled else { return }
        let directory = TemporaryDirectory()
        _ = try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", directory.file("k.pem")])
        _ = try ExternalTool.openssl.run(["pkey", "-in", directory.file("k.pem"), "-pubout", "-outform", "DER", "-out", directory.file("k.der")])
        let spki = Base64.encode(try #require(directory.read("k.der")))
        #expect(Self.refusal(step, [("publicKey", spki), ("signature", "MEUCIQ==")])?.code == "DR-60002")
    }
}
