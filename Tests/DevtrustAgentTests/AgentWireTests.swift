@testable import DevtrustAgent
import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
import DevtrustKeystore
import DevtrustTestSupport
import Glibc
import Testing

/// The agent's wire protocol, in bytes: what a frame reader keeps and decides, what a request may
/// carry, and what a reply says (the real agent and clients: DevtrustCLITests.AgentTests).
@Suite struct AgentWireTests {
    static func frame(_ text: String) -> [UInt8] {
        let body = Array(text.utf8)
        let count = UInt32(body.count)
        return [UInt8(count >> 24), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)] + body
    }

    /// Whom a client speaks to, by the listener's uid as the kernel gives it: root, or the caller;
    /// never the overflow uid outside the machine's own user namespace (or when the namespace cannot
    /// be told), also when it is the caller's own or 0 (`kernel.overflowuid=0`, where another user's
    /// listener shows as 0 to a client in a namespace: an outside review sent it the request so).
    @Test func aClientSpeaksOnlyToRootOrItselfAndNeverToTheOverflowUID() {
        func verdict(_ listener: UInt32, caller: UInt32 = 1001, overflow: UInt32 = 65534, initial: Bool?) -> AgentUnavailable.Reason? {
            AgentClient.refusal(ofListener: listener, caller: caller, overflowUID: overflow, initialNamespace: { initial })
        }
        // The machine's own namespace: root and the caller; anyone else is not the agent.
        #expect(verdict(0, initial: true) == nil && verdict(1001, initial: true) == nil)
        #expect(verdict(1002, initial: true) == .notTheAgent(uid: 1002))
        #expect(verdict(65534, caller: 65534, initial: true) == nil)  // nobody's own agent, on the machine
        // A namespace, or one that cannot be told: the overflow uid names nobody.
        for initial in [false, nil] as [Bool?] {
            #expect(verdict(65534, initial: initial) == .rootNotMapped(uid: 65534))
            #expect(verdict(65534, caller: 65534, initial: initial) == .rootNotMapped(uid: 65534))
            #expect(verdict(0, overflow: 0, initial: initial) == .rootNotMapped(uid: 0))
            #expect(verdict(0, initial: initial) == nil)  // the caller's uid mapped to 0 (`unshare -r`): its own listener
        }
        // The map is read only for a listener of the overflow uid.
        var reads = 0
        _ = AgentClient.refusal(ofListener: 0, caller: 1001, overflowUID: 65534, initialNamespace: { reads += 1; return false })
        #expect(reads == 0)
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
        .forgetRegistrations(uid: nil), .forgetRegistrations(uid: 0), .forgetRegistrations(uid: UInt32.max),
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
        (#"{"v":1,"op":"forget-registrations","uid":-1}"#, "field \"uid\": must be a uid, 0 to 4294967295"),
        (#"{"v":1,"op":"forget-registrations","uid":"1001"}"#, "field \"uid\": must be a uid, 0 to 4294967295"),
        (#"{"v":1,"op":"token","server":"https://a\nb"}"#, "field \"server\": must be a server's URL or name: 1 to 512 bytes of printable ASCII"),
        (#"{"v":1,"op":"token","deviceId":""}"#, "field \"deviceId\": must be 1 to 128 ASCII letters, digits"),
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
        (#"{"v":1,"op":"forget-registrations","uid":1001,"account":"a"}"#, "unknown field \"account\""),
        (#"{"v":1,"op":"forget-registrations","server":"https://a"}"#, "unknown field \"server\""),
    ])
    func aRequestIsReadStrictly(text: String, message: String) {
        #expect {
            try AgentRequest(json: Array(text.utf8))
        } throws: { error in
            (error as? AgentProtocolError)?.message.contains(message) == true
        }
    }

    /// A registration's server, id and flow type, as the review's proof of concept sent them
    /// (poc-fill-keystore.py: a 2048-byte server and a 256-byte id of U+0085, which the keystore's
    /// JSON writes as \u0085: 220 KB of keystore.json per uid, unreadable after 5 uids), and the
    /// other ways out of the bounds: each refused, naming its field, as a value the agent does not
    /// take (exit 2), before anything is signed or recorded.
    @Test(arguments: [
        ("registration-step", "server", "s1000-00" + String(repeating: "\u{85}", count: 992), "must be a server base URL of at most 512 bytes (this one has 1992)"),
        ("registration-step", "server", "https://idp.example/\u{85}", "must be a server base URL in printable ASCII"),
        ("registration-step", "server", "https://idp.example/" + String(repeating: "a", count: 2028), "must be a server base URL of at most 512 bytes (this one has 2048)"),
        ("registration-step", "server", "https://bücher.example", "must be a server base URL in printable ASCII, without spaces, quotes or backslashes (a host in its xn-- form)"),
        ("registration-step", "server", "idp.example", "must be an https:// (or http://) server base URL with a host"),
        ("registration-step", "server", "ftp://idp.example", "must be an https:// (or http://) server base URL with a host"),
        ("registration-step", "server", "https://:443/t/acme", "must be an https:// (or http://) server base URL with a host"),
        ("registration-complete", "server", "https://me@idp.example", "must not carry a user name"),
        ("registration-complete", "server", "https://idp.example/t/acme?x=1", "must be a server base URL, without a query or fragment"),
        ("registration-complete", "server", "https://idp.example/\"x", "must be a server base URL in printable ASCII"),
        ("registration-step", "registrationId", "100000" + String(repeating: "\u{85}", count: 120), "must be 1 to 128 ASCII letters, digits, '-', '.', '_' or '~'"),
        ("registration-complete", "registrationId", String(repeating: "a", count: 129), "must be 1 to 128 ASCII letters"),
        ("registration-complete", "registrationId", "r/1", "must be 1 to 128 ASCII letters"),
        ("registration-complete", "registrationId", "r 1", "must be 1 to 128 ASCII letters"),
        ("registration-complete", "flowType", "REGISTRATION\u{85}", "must be 1 to 64 ASCII letters"),
        ("registration-complete", "flowType", String(repeating: "R", count: 65), "must be 1 to 64 ASCII letters"),
        ("token", "deviceId", "\u{85}", "must be 1 to 128 ASCII letters"),
        ("token", "server", String(repeating: "a", count: 513), "must be a server's URL or name: 1 to 512 bytes of printable ASCII without spaces"),
        ("token", "server", "idp example", "must be a server's URL or name"),
        ("sign-in-token", "server", "https://idp.example/\u{85}", "must be a server's URL or name"),
    ])
    func whatTheMachineKeystoreKeepsIsShortPlainText(operation: String, field: String, value: String, problem: String) throws {
        var request: JSONObject
        let id = "74070bae-df8c-42bf-8754-5173c237c936"
        switch operation {
        case "registration-step":
            request = AgentRequest.registrationStep(server: "https://idp.example", registrationID: id, challenge: "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y",
                                                    requiredParams: ["publicKey"], claims: []).json.objectValue ?? [:]
        case "registration-complete":
            request = AgentRequest.registrationComplete(server: "https://idp.example", registrationID: id, flowType: "REGISTRATION").json.objectValue ?? [:]
        case "sign-in-token":
            request = AgentRequest.signInToken(choice: .server("https://idp.example"), destinations: []).json.objectValue ?? [:]
        default:
            request = AgentRequest.token(server: "https://idp.example", deviceID: id, claims: []).json.objectValue ?? [:]
        }
        // As it was, the request is taken; with the field's value, it is refused, naming the field.
        _ = try AgentRequest(json: JSONWriter.bytes(.object(request)))
        request[field] = .string(value)
        #expect {
            try AgentRequest(json: JSONWriter.bytes(.object(request)))
        } throws: { error in
            guard let error = error as? AgentProtocolError else { return false }
            let classification = error.classification
            return classification.category == .usage && error.message.hasPrefix("field \"\(field)\": \(problem)")
                && classification.summary.hasPrefix("the devtrust agent refused the request: field \"\(field)\"")
                && classification.message.contains("what it takes is in docs/usage.md, \"The system agent\"")
        }
    }

    /// What servers send is taken: the base URLs `register --server` makes (`ServerURL`), the
    /// reference server's, an IPv6 host, a URL of 512 bytes; WSO2's ids (UUIDs), an id of 128.
    @Test func whatServersSendIsTaken() throws {
        let longest = "https://idp.example/" + String(repeating: "t", count: AgentRequest.maximumServerLength - 20)
        for server in ["https://api.asgardeo.io/t/acme", "http://127.0.0.1:43121", "https://[::1]:9443/t/carbon.super", "https://localhost:9443",
                       "https://xn--bcher-kva.example/o/a_b~c-d.e%20f", "HTTPS://IDP.example:443/", longest] {
            #expect(AgentRequest.serverURLProblem(server) == nil, "\(server)")
            let request = AgentRequest.registrationComplete(server: server, registrationID: "74070bae-df8c-42bf-8754-5173c237c936", flowType: "REGISTRATION")
            #expect(try AgentRequest(json: JSONWriter.bytes(request.json)) == request)
        }
        for id in ["74070bae-df8c-42bf-8754-5173c237c936", "74070BAE-DF8C-42BF-8754-5173C237C936", "r-1", "a.b_c~d", String(repeating: "a", count: 128)] {
            #expect(AgentRequest.identifierProblem(id) == nil, "\(id)")
            let request = AgentRequest.token(server: "idp.example/t/acme", deviceID: id, claims: [])
            #expect(try AgentRequest(json: JSONWriter.bytes(request.json)) == request)
        }
    }

    /// The largest machine keystore the bounds allow: as many registrations as it keeps, each with
    /// the longest server, id and flow type the agent takes and the largest uid, is far below what
    /// a keystore reads (before, 5 uids made it unreadable: the review's 1,048,835 bytes).
    @Test func theLargestMachineKeystoreIsReadable() throws {
        let server = "https://idp.example/" + String(repeating: "~", count: AgentRequest.maximumServerLength - 20)
        let id = String(repeating: "~", count: AgentRequest.maximumIDLength), flowType = String(repeating: "_", count: AgentRequest.maximumFlowTypeLength)
        #expect(AgentRequest.serverURLProblem(server) == nil && AgentRequest.identifierProblem(id) == nil
                && AgentRequest.identifierProblem(flowType, limit: AgentRequest.maximumFlowTypeLength) == nil)
        let fingerprint = String(repeating: "A", count: 43)
        var state = KeystoreState()
        state.key = KeyRecord(backend: .tpm, file: "key-\(fingerprint).tss2", fingerprint: fingerprint, createdAt: "2026-11-30T00:00:00Z")
        // The longest account a record carries (a name past 64 bytes is recorded as its digest).
        let account = AccountName.recorded(String(repeating: "x", count: 1000))
        #expect(account.utf8.count == 71)
        state.registrations = (0..<DeviceStore.maximumRegistrations).map { index in
            RegistrationRecord(registrationId: id, server: server, flowType: flowType, keyFingerprint: fingerprint,
                               registeredAt: "2026-11-30T00:00:00Z", uid: UInt32.max - UInt32(index / DeviceStore.maximumRegistrationsPerUser),
                               account: account)
        }
        state.formerRegistrations = (0..<DeviceStore.maximumFormerRegistrations).map { index in
            FormerRegistration(registrationId: id, uid: UInt32.max - UInt32(index), account: account)
        }
        let size = KeystoreFormat.encode(state).count
        #expect(size < Keystore.maximumManifestBytes * 3 / 4, "\(size) bytes of keystore.json, for a limit of \(Keystore.maximumManifestBytes)")
        #expect(size > DeviceStore.maximumRegistrations * (server.utf8.count + id.utf8.count), "\(size)")
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
        #expect(AgentRequest.signChallenge(challenge: "abc").server == nil && AgentRequest.forgetRegistrations(uid: 1001).server == nil)
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

    /// What a client chose is shortened in the audit: a line stays a line (before, the review's
    /// 2 KB server of U+0085 was escaped to 12 KB in every line).
    @Test func anAuditLineShortensWhatAClientChose() {
        let peer = AgentPeer(uid: 1000, gid: 1000, pid: 42)
        let server = "https://idp.example/" + String(repeating: "a", count: 492)
        let line = AgentAuditRecord(peer: peer, operation: "token", server: server, outcome: "ok").line
        let kept = "https://idp.example/" + String(repeating: "a", count: AgentAuditRecord.maximumServerBytes - 20)
        #expect(line == #"devtrust agent: uid=1000 pid=42 op=token server="\#(kept)…(+256 bytes)" outcome="ok""#, "\(line)")
        let junk = "refused: unknown field \"" + String(repeating: "\u{85}", count: 60_000) + "\""
        let refused = AgentAuditRecord(peer: peer, operation: nil, server: String(repeating: "\u{85}", count: 2048), outcome: junk).line
        #expect(refused.utf8.count < AgentAuditRecord.maximumServerBytes + AgentAuditRecord.maximumOutcomeBytes + 200, "\(refused.utf8.count) bytes")
        #expect(refused.contains(#"outcome="refused: unknown field \"\u0085"#) && refused.contains("…(+") && !refused.contains("\n"))
        let short = AgentAuditRecord(peer: peer, operation: "token", server: "https://idp.example", outcome: "refused: x").line
        #expect(short == #"devtrust agent: uid=1000 pid=42 op=token server="https://idp.example" outcome="refused: x""#)
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

    /// The audit names the jti the agent put in what it minted (the minting returns it; nothing is
    /// read back from the token): a token, deviceData (alone, and in a Device Registration step's
    /// answer), a DPoP proof, a sign-in's device token. The agent's service in this process, as root,
    /// over a machine keystore with a software key and a registration of root's.
    @Test func theAuditNamesTheJTIThatWasMinted() throws {
        let directory = TemporaryDirectory("agent-audit-jti")
        let keystore = Keystore(path: directory.file("ks"), ownerID: geteuid())
        guard case let .created(key, _, _) = try DeviceStore(keystore: keystore).initialize(backend: .software, force: false) else {
            throw FixtureError("no key made in \(keystore.path)")
        }
        try DeviceStore(keystore: keystore).recordRegistration(RegistrationRecord(registrationId: "r-1", server: "https://idp.example", flowType: "REGISTRATION",
                                                                                  keyFingerprint: key.fingerprint, registeredAt: "2026-01-01T00:00:00Z"))
        var settings = AgentService.Settings(keystore: keystore, configuration: Configuration(), policy: AgentPolicy(), cache: nil, clock: SystemClock(),
                                             random: SystemRandom(), tpm: TPMSelection(explicit: nil, environment: [:]))
        // Below a root of its own, the posture reads none of this machine's files and runs nothing.
        settings.postureRoot = directory.file("machine")
        final class Audit: @unchecked Sendable { var records = [AgentAuditRecord]() }
        let audit = Audit()
        let service = AgentService(settings: settings, audit: { audit.records.append($0) }, warn: { _ in })
        let root = AgentPeer(uid: 0, gid: 0, pid: getpid())
        let challenge = Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
        let requests: [(AgentRequest, String)] = [
            (.token(server: nil, deviceID: "r-1", claims: []), "token"),
            (.deviceData(claims: []), "deviceData"),
            (.registrationStep(server: "https://idp.example", registrationID: "r-2", challenge: challenge, requiredParams: ["publicKey", "signature", "deviceData"],
                               claims: []), "deviceData"),
            (.dpopProof(method: "POST", url: "https://idp.example/oauth2/token", nonce: nil, accessTokenHash: nil), "proof"),
            (.signInToken(choice: .server("https://idp.example"), destinations: ["https://idp.example/oauth2/authorize"]), "token"),
        ]
        for (request, field) in requests {
            guard case let .success(result) = service.handle(root, request) else {
                Issue.record("\(request.operation): \(service.handle(root, request))")
                continue
            }
            let jwt = try #require(result[field]?.stringValue, "\(request.operation): \(result)")
            let payload = try JSONParser.parse(Base64URL.decode(String(jwt.split(separator: ".")[1]), padding: .optional)).objectValue
            let jti = try #require(payload?["jti"]?.stringValue)
            let record = try #require(audit.records.last)
            #expect(record.operation == request.operation && record.outcome == "ok" && record.jti == jti, "\(request.operation): \(record)")
            #expect(record.line.contains(#" jti="\#(jti)" "#) && !record.line.contains(jwt), "\(record.line)")
        }
        #expect(Set(audit.records.compactMap(\.jti)).count == requests.count)
        service.stop()
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
