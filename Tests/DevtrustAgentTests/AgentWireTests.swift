@testable import DevtrustAgent
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import Testing

/// The agent's wire protocol, in bytes: what a frame reader keeps and decides, what a request may
/// carry, and what a reply says (the real agent and clients: DevtrustCLITests.AgentTests).
@Suite struct AgentWireTests {
    static func frame(_ text: String) -> [UInt8] {
        let body = Array(text.utf8)
        let count = UInt32(body.count)
        return [UInt8(count >> 24), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)] + body
    }

    @Test func aFrameIsReadAsItArrivesAndNoFurtherThanItsBound() {
        var reader = FrameReader(limit: 16)
        #expect(reader.wanted == 4 && reader.state == .incomplete)
        let bytes = Self.frame(#"{"a":1}"#)
        reader.append(bytes.prefix(2))
        #expect(reader.state == .incomplete && reader.wanted == 2)
        reader.append(bytes[2..<6])
        // What the frame still needs, and one byte more to see trailing ones: never more.
        #expect(reader.state == .incomplete && reader.wanted == 7 + 4 + 1 - 6)
        reader.append(bytes[6...])
        #expect(reader.state == .complete(Array(#"{"a":1}"#.utf8), trailing: false))
        reader.append([0x00])
        #expect(reader.state == .complete(Array(#"{"a":1}"#.utf8), trailing: true))

        var huge = FrameReader(limit: 16)
        huge.append([0xFF, 0xFF, 0xFF, 0xFF])
        #expect(huge.state == .tooLarge(length: 0xFFFF_FFFF))
        // A header at the bound is read to the bound, not to what it announces.
        var atBound = FrameReader(limit: 16)
        atBound.append([0, 0, 0, 17])
        #expect(atBound.state == .tooLarge(length: 17))
        var empty = FrameReader(limit: 16)
        empty.append([0, 0, 0, 0])
        #expect(empty.state == .empty)
    }

    @Test(arguments: [
        AgentRequest.publicKey, .status, .token(server: nil, deviceID: nil, claims: []),
        .token(server: "https://idp.example/t/acme", deviceID: "74070bae-df8c-42bf-8754-5173c237c936", claims: [GivenClaim(name: "ticket", value: "4 2")]),
        .registrationStep(server: "https://idp.example", registrationID: "r-1", challenge: "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y",
                          requiredParams: ["publicKey", "signature", "deviceData"], claims: []),
        .registrationComplete(server: "https://idp.example", registrationID: "r-1", flowType: "REGISTRATION"),
        .signChallenge(challenge: "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"), .deviceData(claims: []),
        .deviceData(claims: [GivenClaim(name: "ticket", value: "42")]),
        .dpopProof(method: "GET", url: "https://api.example/orders?id=1", nonce: nil, accessTokenHash: nil),
        .dpopProof(method: "POST", url: "http://127.0.0.1:8080/r", nonce: "n-1_x!~", accessTokenHash: "sda5G2fCr6XjIpiNlGJjjTVN34oe9526mH-BXCK0uu4"),
        .signInToken(choice: .server("https://idp.example/t/acme"), destinations: ["https://idp.example/t/acme/oauth2/authorize"]),
        .signInToken(choice: .provider(destination: "https://op.example/authorize", providerURLs: ["https://op.example"]), destinations: []),
        .forgetRegistrations,
    ])
    func everyRequestReadsBackAsItWasWritten(request: AgentRequest) throws {
        #expect(try AgentRequest(json: JSONWriter.bytes(request.json)) == request)
    }

    @Test(arguments: [
        ("not json", "the request is not JSON"),
        (#"{"v":2,"op":"pubkey"}"#, "field \"v\": this agent speaks version 1"),
        (#"{"op":"pubkey"}"#, "missing required field \"v\""),
        (#"{"v":1,"op":"sign-anything"}"#, "field \"op\": no operation \"sign-anything\""),
        (#"{"v":1,"op":"pubkey","uid":0}"#, "unknown field \"uid\""),
        (#"{"v":1,"op":"token","uid":0}"#, "unknown field \"uid\""),
        (#"{"v":1,"op":"token","server":"https://a\nb"}"#, "field \"server\": must be 1 to 2048 bytes of printable text"),
        (#"{"v":1,"op":"token","deviceId":""}"#, "field \"deviceId\": must be 1 to 256 bytes"),
        (#"{"v":1,"op":"token","claims":[["a"]]}"#, "field \"claims[0]\": must be [NAME, VALUE]"),
        (#"{"v":1,"op":"token","claims":{"a":"b"}}"#, "field \"claims\" must be an array"),
        (#"{"v":1,"op":"registration-step","server":"https://a","registrationId":"r","challenge":"c","requiredParams":[1]}"#,
         "field \"requiredParams[0]\" must be a string"),
        (#"[[[[[[[[1]]]]]]]]"#, "the request is not JSON"),
        // sign-challenge: the challenge only, printable and bounded.
        (#"{"v":1,"op":"sign-challenge"}"#, "missing required field \"challenge\""),
        (#"{"v":1,"op":"sign-challenge","challenge":""}"#, "field \"challenge\": must be 1 to 16384 bytes"),
        (#"{"v":1,"op":"sign-challenge","challenge":"abc","message":"abc"}"#, "unknown field \"message\""),
        (#"{"v":1,"op":"device-data","deviceId":"x"}"#, "unknown field \"deviceId\""),
        // dpop-proof: no header, claim or time of the client's; each field as a proof carries it.
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","header":{"typ":"JWT"}}"#, "unknown field \"header\""),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","claims":[["sub","x"]]}"#, "unknown field \"claims\""),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","jwk":{}}"#, "unknown field \"jwk\""),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","iat":1}"#, "unknown field \"iat\""),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","htu":"https://x/"}"#, "unknown field \"htu\""),
        (#"{"v":1,"op":"dpop-proof","method":"get","url":"https://r.example/"}"#, "field \"method\": must be an HTTP method in upper case"),
        (#"{"v":1,"op":"dpop-proof","method":"GET /x","url":"https://r.example/"}"#, "field \"method\": must be an HTTP method"),
        (#"{"v":1,"op":"dpop-proof","method":"ABCDEFGHIJKLMNOPQ","url":"https://r.example/"}"#, "field \"method\": must be an HTTP method"),
        (#"{"v":1,"op":"dpop-proof","url":"https://r.example/"}"#, "missing required field \"method\""),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"javascript:alert(1)"}"#, "field \"url\": must be an https:// (or http://) URL"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https:///path"}"#, "field \"url\": must be an https:// (or http://) URL with a host"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://me@r.example/"}"#, "field \"url\": must not carry a user name"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/\",\"x\":\""}"#, "field \"url\": must be printable ASCII without spaces"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/a b"}"#, "field \"url\": must be printable ASCII without spaces"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","nonce":"a b"}"#, "field \"nonce\": must be 1 to 4096 characters"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","nonce":""}"#, "field \"nonce\": must be 1 to 4096 characters"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","ath":"abc"}"#, "field \"ath\": must be a SHA-256 hash in base64url"),
        (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/","ath":"fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQE="}"#,
         "field \"ath\": must be a SHA-256 hash in base64url"),
        // sign-in-token: a server or a provider's destination, never a registration of the client's naming.
        (#"{"v":1,"op":"sign-in-token","destinations":[]}"#, "give \"server\" or \"destination\", one of them"),
        (#"{"v":1,"op":"sign-in-token","server":"https://a","destination":"https://a/authorize"}"#, "give \"server\" or \"destination\", one of them"),
        (#"{"v":1,"op":"sign-in-token","server":"https://a","providerUrls":["https://a"]}"#, "field \"providerUrls\": goes with \"destination\""),
        (#"{"v":1,"op":"sign-in-token","server":"https://a","deviceId":"r-1"}"#, "unknown field \"deviceId\""),
        (#"{"v":1,"op":"sign-in-token","server":"https://a","destinations":["https://a","https://a","https://a","https://a","https://a","https://a","https://a","https://a","https://a"]}"#,
         "field \"destinations\": at most 8"),
        (#"{"v":1,"op":"sign-in-token","server":"https://a","destinations":[1]}"#, "field \"destinations[0]\" must be a string"),
        // forget-registrations: whose is the kernel's to say.
        (#"{"v":1,"op":"forget-registrations","uid":1001}"#, "unknown field \"uid\""),
        (#"{"v":1,"op":"forget-registrations","server":"https://a"}"#, "unknown field \"server\""),
    ])
    func aRequestIsReadStrictly(text: String, message: String) {
        #expect {
            try AgentRequest(json: Array(text.utf8))
        } throws: { error in
            (error as? AgentProtocolError)?.message.contains(message) == true
        }
    }

    @Test func aRequestCarriesBoundedClaims() throws {
        let many = "[" + (0...AgentRequest.maximumClaims).map { #"["c\#($0)","v"]"# }.joined(separator: ",") + "]"
        #expect(throws: AgentProtocolError.self) { try AgentRequest(json: Array(#"{"v":1,"op":"token","claims":\#(many)}"#.utf8)) }
        let long = String(repeating: "v", count: AgentRequest.maximumClaimValueLength + 1)
        #expect(throws: AgentProtocolError.self) { try AgentRequest(json: Array(#"{"v":1,"op":"token","claims":[["a","\#(long)"]]}"#.utf8)) }
    }

    @Test func aChallengeToSignIsBounded() throws {
        let atBound = String(repeating: "A", count: AgentRequest.maximumSignedChallengeLength)
        #expect(try AgentRequest(json: Array(#"{"v":1,"op":"sign-challenge","challenge":"\#(atBound)"}"#.utf8)) == .signChallenge(challenge: atBound))
        #expect(throws: AgentProtocolError.self) { try AgentRequest(json: Array(#"{"v":1,"op":"sign-challenge","challenge":"\#(atBound)A"}"#.utf8)) }
    }

    /// What the audit names of a request: never a resource's path or query, only its origin.
    @Test func theAuditNamesAServerNeverAResourcesPath() {
        #expect(AgentRequest.dpopProof(method: "GET", url: "HTTPS://R.example:443/private/path?secret=1", nonce: nil, accessTokenHash: nil).server
                == "https://r.example")
        #expect(AgentRequest.signInToken(choice: .provider(destination: "https://op.example/t/a/authorize?x=1", providerURLs: []), destinations: []).server
                == "https://op.example")
        #expect(AgentRequest.signChallenge(challenge: "abc").server == nil && AgentRequest.forgetRegistrations.server == nil)
    }

    /// A refusal reaches the client classified as it was in the agent (its exit code, its hint).
    @Test func aReplyReadsBackAsItWasWritten() throws {
        let success = AgentReply.success(["token": .string("t")])
        #expect(AgentReply(json: JSONWriter.bytes(success.json)) == success)
        for category in ErrorCategory.withoutValues {
            let failure = AgentReply.failure(ErrorClassification(category, summary: "what failed", hint: ErrorHint("what to do", joinedBy: " (", closing: ")")))
            #expect(AgentReply(json: JSONWriter.bytes(failure.json)) == failure)
        }
        let withValues = AgentReply.failure(ErrorClassification(.oauthError(code: "x", description: nil), summary: "s"))
        #expect(AgentReply(json: JSONWriter.bytes(withValues.json)) == .failure(ErrorClassification(.failure, summary: "s")))
        for junk in ["", "{}", #"{"ok":{},"error":{}}"#, #"{"error":{"category":"bogus","summary":"s"}}"#, #"{"ok":[]}"#] {
            #expect(AgentReply(json: Array(junk.utf8)) == nil, "\(junk)")
        }
    }

    /// An audit line is one line, whatever a client put in what it names.
    @Test func anAuditLineIsOneLine() {
        let record = AgentAuditRecord(peer: AgentPeer(uid: 1000, gid: 1000, pid: 42), operation: "token", server: "https://a\ndevtrust agent: uid=0 \"x\"",
                                      jti: "j", outcome: "ok")
        #expect(record.line == #"devtrust agent: uid=1000 pid=42 op=token server="https://a\ndevtrust agent: uid=0 \"x\"" jti="j" outcome="ok""#)
        #expect(!record.line.contains("\n"))
    }

    @Test func aUserMayAskABurstThenAtTheRate() {
        let limiter = AgentRateLimiter(burst: 3, perSecond: 2)
        #expect((0..<3).allSatisfy { _ in limiter.take(1000, now: 0) })
        #expect(!limiter.take(1000, now: 0))
        // Another user has their own allowance.
        #expect(limiter.take(1001, now: 0))
        #expect(!limiter.take(1000, now: 400))
        #expect(limiter.take(1000, now: 500))
        #expect(!limiter.take(1000, now: 500))
        // Never more than the burst, however long the wait.
        #expect((0..<3).allSatisfy { _ in limiter.take(1000, now: 1_000_000) })
        #expect(!limiter.take(1000, now: 1_000_000))
    }

    @Test func theJTIOfAMintedTokenIsReadForTheAudit() {
        let payload = Base64URL.encode(Array(#"{"jti":"abc","iat":1}"#.utf8))
        #expect(AgentService.jti(of: "eyJ0.\(payload).sig") == "abc")
        #expect(AgentService.jti(of: "junk") == nil)
    }

    /// The loop's own audit (connections refused or dropped): one line per uid per interval, the
    /// rest counted into one line when the interval ends, another uid's lines apart.
    @Test func aUsersRefusedConnectionsAreAuditedOnceAnInterval() {
        var audit = AgentConnectionAudit(interval: 10_000)
        let mallory = AgentPeer(uid: 1001, gid: 1001, pid: 7), alice = AgentPeer(uid: 1000, gid: 1000, pid: 8)
        let first = audit.record(AgentAuditRecord(peer: mallory, operation: nil, outcome: "refused: too many"), now: 0)
        #expect(first.map(\.outcome) == ["refused: too many"])
        for time in 1...40 {
            #expect(audit.record(AgentAuditRecord(peer: mallory, operation: nil, outcome: time % 2 == 0 ? "refused: too many" : "dropped: silent"),
                                 now: Int64(time)).isEmpty)
        }
        #expect(audit.record(AgentAuditRecord(peer: alice, operation: nil, outcome: "refused: junk"), now: 50).map(\.outcome) == ["refused: junk"])
        #expect(audit.nextDue == 10_000 && audit.due(now: 9_999).isEmpty)
        let summary = audit.due(now: 10_000)
        #expect(summary.count == 1 && summary.first?.peer == mallory, "\(summary)")
        #expect(summary.first?.outcome == "40 more since the last line: 20 dropped: silent; 20 refused: too many", "\(summary)")
        #expect(audit.nextDue == nil)
        // The next interval starts with its first line counted (one was said when it began), and the rest come out when the agent stops.
        #expect(audit.record(AgentAuditRecord(peer: mallory, operation: nil, outcome: "dropped: silent"), now: 10_001).isEmpty)
        #expect(audit.all().map(\.outcome) == ["1 more since the last line: 1 dropped: silent"])
        // A uid quiet for an interval starts afresh with a line of its own.
        #expect(audit.record(AgentAuditRecord(peer: mallory, operation: nil, outcome: "dropped: silent"), now: 30_000).count == 1)
    }

    /// A client that gets no answer in time is told the agent is busy, not that it is down.
    @Test func aClientThatTimesOutIsToldTheAgentIsBusy() {
        let classification = AgentUnavailable(socket: "/run/devtrust/agent.sock", reason: .timedOut(seconds: 30)).classification
        #expect(classification.category == .tpm)
        #expect(classification.message.contains("the devtrust agent at /run/devtrust/agent.sock is busy: it did not answer within 30 s"), "\(classification.message)")
        #expect(!classification.message.contains("start the agent") && classification.message.contains("try again in a moment"), "\(classification.message)")
    }
}
