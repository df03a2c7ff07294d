import DevtrustEncoding
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeys
import DevtrustSignIn
import Foundation
import Synchronization

/// An identity server in the test process, for the fast tier (`make check`): it answers devtrust's
/// `HTTPRequest`s as ../shared/docs/server-contract.md says the server does, and as the reference
/// server (Tests/ReferenceServer, which `make test` runs over real HTTP) does, for what the fast
/// tier's command tests use:
/// - the Flow Execution API's registration flow: a VIEW for the account (email and password), the
///   Device Registration step (INTERNAL_PROMPT), COMPLETE; only then is the device stored;
/// - device tokens checked as the server checks them at sign-in (`deviceCheck`);
/// - WSO2's discovery document, its JWK set, RFC 8628 device authorization and polling, and the
///   token endpoint's refresh grant, with ID tokens it signs.
/// It checks what devtrust sends for real: `publicKey` and `signature` in strict standard base64, the
/// DER signature over the decoded challenge with that key, `deviceData` and device tokens as ES256
/// JWS verified with the registered key, flat claims, `jti` never twice, `iat` within 5 minutes
/// behind and 30 s ahead of its own clock, the polling interval kept. Every answer carries its clock
/// in a `Date` header. Its clock is `time` plus `clockOffset`; a request to any other host fails as
/// to a host that does not exist.
public final class FakeIdentityServer: Sendable {
    public static let clientID = "devtrust-app"
    public static let user = (email: "alice@example.com", password: "correct horse")
    /// What the registration's VIEW step asks for, as `register`'s `--input` options.
    public static let registrationAnswers = ["--input", "http://wso2.com/claims/emailaddress=\(user.email)", "--input", "password=\(user.password)"]
    static let emailClaim = "http://wso2.com/claims/emailaddress"

    /// One answer to a device-code poll, in the order the polls come (`Settings.polls`).
    public enum Poll: Sendable, Equatable {
        case pending, slowDown, approve, deny, expire
        /// 503 with `{"error":"temporarily_unavailable"}`.
        case unavailable
        /// The connection closes without an answer.
        case noAnswer
    }

    public struct Settings: Sendable {
        /// The base URL: WSO2's form, in a tenant.
        public var base = "https://idp.example.test/t/acme"
        /// The server's clock minus the test's (`VirtualTime`), in seconds.
        public var clockOffset: Double = 0
        /// The Device Registration step requires `deviceData` (the server has a device policy).
        public var deviceDataRequired = false
        /// Claims the device policy requires, compared as the server does (as strings).
        public var requiredClaims: [String: String] = [:]
        /// The device step is answered with this error code (HTTP 400) instead of COMPLETE.
        public var deviceStepError: String?
        /// RFC 8628: the grant's life and interval (nil: no interval in the answer, 5 s then).
        public var deviceExpiresIn: Int64 = 600
        public var deviceInterval: Int64? = 5
        /// The answers to the polls, in order; after them, `.pending`.
        public var polls: [Poll] = [.approve]
        public var accessTokenLifetime: Int64 = 3600
        /// The refresh grant is refused with `invalid_grant`.
        public var refuseRefresh = false

        public init() {}
    }

    /// A device the server stored at COMPLETE.
    public struct Device: Sendable {
        public let registrationId: String
        public let user: String
        /// As sent: standard base64 of the SPKI.
        public let publicKey: String
        public let deviceModel: String?
        /// The deviceData's claims, when the step required it.
        public let claims: JSONObject?
        /// The deviceData as sent, whether the step asked for it or not.
        public let deviceData: String?
    }

    /// What the server made of a device token (never a reason to fail a request at sign-in).
    public struct DeviceCheck: Sendable, CustomStringConvertible {
        public let accepted: Bool
        public let reason: String?
        public let deviceId: String?
        public let claims: JSONObject?
        public var description: String { accepted ? "accepted for \(deviceId ?? "?"): \(claims.map { JSONWriter.string(.object($0)) } ?? "")" : "refused: \(reason ?? "?")" }
    }

    /// One request as it arrived: its method, its path below the base, and for a form its parameters.
    public struct Request: Sendable {
        public let method: String
        public let path: String
        public let form: [String: String]
    }

    private struct Flow {
        var step: String
        var user: String?
        var registrationId: String?
        var challenge: [UInt8]?
    }

    private struct Grant {
        let deviceCode: String
        let created: Double
        var interval: Int64
        var polls: [Double] = []
        var done = false
    }

    private struct State {
        var settings: Settings
        var offline = false
        var requests = [Request]()
        var flows = [String: Flow]()
        var devices = [Device]()
        var usedJTIs = Set<String>()
        var grants = [Grant]()
        var pollsTooSoon = 0
        var accessTokens = Set<String>()
        var refreshTokens = Set<String>()
        var refreshes = 0
    }

    public let time: VirtualTime
    public let base: String
    /// scheme://host of `base`, and its path (the tenant's).
    private let origin: String
    private let basePath: String
    public var issuer: String { base + "/oauth2/token" }
    /// The key its ID tokens are signed with (the JWK set publishes its public part).
    private let signingKey: SoftwareDeviceKey
    private let state: Mutex<State>

    public init(time: VirtualTime, _ settings: Settings = Settings()) throws {
        self.time = time
        base = settings.base
        let hostStart = base.range(of: "://")!.upperBound
        let pathStart = base[hostStart...].firstIndex(of: "/") ?? base.endIndex
        origin = String(base[..<pathStart])
        basePath = String(base[pathStart...])
        signingKey = try SoftwareDeviceKey.generate()
        state = Mutex(State(settings: settings))
    }

    /// The server's clock, in seconds since the epoch.
    public var now: Double { time.seconds + state.withLock { $0.settings.clockOffset } }

    /// From now on every request fails as to a server that is down (`false`: it is back).
    public func goOffline(_ offline: Bool = true) { state.withLock { $0.offline = offline } }

    /// Changes its settings from now on (the polls still to answer are `settings.polls`).
    public func update(_ change: (inout Settings) -> Void) { state.withLock { change(&$0.settings) } }

    public var requests: [Request] { state.withLock { $0.requests } }
    public var devices: [Device] { state.withLock { $0.devices } }
    /// When each poll of the device-code grants arrived (the server's clock), and how long after its grant.
    public var pollTimes: [[Double]] { state.withLock { $0.grants.map { grant in grant.polls.map { $0 - grant.created } } } }
    /// Polls sooner than the interval the server asked for (answered `slow_down`).
    public var pollsTooSoon: Int { state.withLock { $0.pollsTooSoon } }
    /// Every device code it gave out (secrets: devtrust never shows them).
    public var deviceCodes: [String] { state.withLock { $0.grants.map(\.deviceCode) } }
    public var refreshes: Int { state.withLock { $0.refreshes } }
    public func isValidAccessToken(_ token: String) -> Bool { state.withLock { $0.accessTokens.contains(token) } }

    /// devtrust's HTTP client for `options`, talking to this server (`CommandEnvironment.httpTransport`).
    public func transport(_ options: HTTPOptions) -> any HTTPClient {
        Transport(server: self, options: options)
    }

    struct Transport: HTTPClient {
        let server: FakeIdentityServer
        let options: HTTPOptions

        func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
            // As curl does, the wait observer hears that every transfer ended.
            defer { options.waitObserver?.finished() }
            return try server.answer(request)
        }
    }

    // MARK: - Requests

    func answer(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        guard request.url.hasPrefix(origin + "/") else {
            throw .transport(url: request.url, failure: .resolve, detail: "Could not resolve host")
        }
        guard !state.withLock({ $0.offline }) else {
            throw .transport(url: request.url, failure: .connect, detail: "Connection refused")
        }
        // Below the base: its path without the tenant's; elsewhere on the host, what no endpoint answers.
        let fromOrigin = String(request.url.dropFirst(origin.count))
        let path = fromOrigin.hasPrefix(basePath + "/") ? String(fromOrigin.dropFirst(basePath.count)) : "(outside \(basePath)) " + fromOrigin
        let form = Self.header(request, "Content-Type") == "application/x-www-form-urlencoded"
            ? FormEncoding.queryParameters(String(decoding: request.body ?? [], as: UTF8.self)) : [:]
        state.withLock { $0.requests.append(Request(method: request.method, path: path, form: form)) }
        switch (request.method, path) {
        case ("POST", "/api/server/v1/flow/execute"):
            return flowExecute(request)
        case ("GET", "/oauth2/token/.well-known/openid-configuration"):
            return json(200, discovery)
        case ("GET", "/oauth2/jwks"):
            var jwk = signingKey.publicKey.jwk
            jwk["kid"] = .string("fake-1")
            jwk["use"] = .string("sig")
            jwk["alg"] = .string("ES256")
            return json(200, ["keys": .array([.object(jwk)])])
        case ("POST", "/oauth2/device_authorize"):
            return deviceAuthorize(form)
        case ("POST", "/oauth2/token"):
            return try token(form, url: request.url)
        case ("POST", "/oauth2/revoke"):
            state.withLock { _ = $0.accessTokens.remove(form["token"] ?? ""); _ = $0.refreshTokens.remove(form["token"] ?? "") }
            return respond(200, [], [])
        default:
            return respond(404, [("Content-Type", "text/html")], Array("<html>Not Found</html>".utf8))
        }
    }

    /// The last value of a request's header (names compare case-insensitively).
    static func header(_ request: HTTPRequest, _ name: String) -> String? {
        request.headers.last(where: { $0.name.lowercased() == name.lowercased() })?.value
    }

    private func respond(_ status: Int, _ headers: [(name: String, value: String)], _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Date", Self.httpDate(now))] + headers, body: body)
    }

    private func json(_ status: Int, _ document: JSONObject) -> HTTPResponse {
        respond(status, [("Content-Type", "application/json")], JSONWriter.bytes(.object(document)))
    }

    /// The Flow Execution API's error: `{"code","message","description","traceId"}`.
    private func flowError(_ code: String, _ message: String, _ description: String) -> HTTPResponse {
        json(400, ["code": .string(code), "message": .string(message), "description": .string(description), "traceId": .null])
    }

    private func oauthError(_ status: Int, _ error: String, _ description: String) -> HTTPResponse {
        json(status, ["error": .string(error), "error_description": .string(description)])
    }

    // MARK: - Registration (server contract, section 1)

    private func flowExecute(_ request: HTTPRequest) -> HTTPResponse {
        guard Self.header(request, "Content-Type") == "application/json", case let .object(body)? = try? JSONParser.parse(request.body ?? []) else {
            return flowError("FE-60001", "Invalid request", "the body must be a JSON object")
        }
        guard let flowId = body["flowId"]?.stringValue else {
            guard body["flowType"]?.stringValue == "REGISTRATION" else {
                return flowError("FE-60002", "Invalid flow type", "unknown flowType")
            }
            let flowId = UUID().uuidString.lowercased()
            state.withLock { $0.flows[flowId] = Flow(step: "credentials") }
            return credentialsStep(flowId)
        }
        guard let flow = state.withLock({ $0.flows[flowId] }) else {
            return flowError("DR-60001", "Flow context expired", "no active flow \(flowId); start again")
        }
        // Every input value is a JSON string (the server maps inputs to a string map).
        var inputs = [String: String]()
        for member in body["inputs"]?.objectValue?.members ?? [] {
            guard let value = member.value.stringValue else { return flowError("FE-60008", "Invalid user inputs", "every input value must be a string") }
            inputs[member.key] = value
        }
        switch flow.step {
        case "credentials":
            guard body["actionId"]?.stringValue == "submit-registration" else {
                return flowError("FE-60008", "Invalid user inputs", "unknown actionId")
            }
            guard let email = inputs[Self.emailClaim], email.contains("@"), let password = inputs["password"], password.count >= 8 else {
                return flowError("FE-60008", "Invalid user inputs", "an email and a password of at least 8 characters are required")
            }
            return devicePrompt(flowId, user: email)
        case "device":
            return deviceAnswer(flowId, flow, inputs)
        default:
            return flowError("FE-60001", "Invalid request", "the flow is finished")
        }
    }

    private func credentialsStep(_ flowId: String) -> HTTPResponse {
        func input(_ id: String, _ variant: String, _ identifier: String, _ label: String) -> JSONValue {
            .object(["id": .string(id), "type": .string("INPUT"), "variant": .string(variant),
                     "config": .object(["identifier": .string(identifier), "label": .string(label), "required": .bool(true)])])
        }
        let form: JSONValue = .object(["id": .string("form_1"), "type": .string("FORM"), "components": .array([
            input("email", "EMAIL", Self.emailClaim, "Email"), input("password", "PASSWORD", "password", "Password"),
            .object(["id": .string("submit"), "type": .string("BUTTON"), "actionId": .string("submit-registration"), "variant": .string("PRIMARY"),
                     "config": .object(["text": .string("Continue")])]),
        ])])
        return json(200, ["flowId": .string(flowId), "flowType": .string("REGISTRATION"), "flowStatus": .string("INCOMPLETE"), "type": .string("VIEW"),
                          "data": .object(["components": .array([form]), "requiredParams": .array([.string(Self.emailClaim), .string("password")])])])
    }

    private func devicePrompt(_ flowId: String, user: String) -> HTTPResponse {
        let registrationId = UUID().uuidString.lowercased()
        let challenge = (try? SystemRandom().bytes(count: 32)) ?? []
        let required = state.withLock { state in
            state.flows[flowId] = Flow(step: "device", user: user, registrationId: registrationId, challenge: challenge)
            return ["publicKey", "signature"] + (state.settings.deviceDataRequired || !state.settings.requiredClaims.isEmpty ? ["deviceData"] : [])
        }
        return json(200, ["flowId": .string(flowId), "flowType": .string("REGISTRATION"), "flowStatus": .string("INCOMPLETE"), "type": .string("INTERNAL_PROMPT"),
                          "data": .object(["requiredParams": .array(required.map { .string($0) }),
                                           "additionalData": .object(["registrationId": .string(registrationId), "challenge": .string(Base64URL.encode(challenge))])])])
    }

    private func deviceAnswer(_ flowId: String, _ flow: Flow, _ inputs: [String: String]) -> HTTPResponse {
        let settings = state.withLock { $0.settings }
        let needsDeviceData = settings.deviceDataRequired || !settings.requiredClaims.isEmpty
        for name in ["publicKey", "signature"] where (inputs[name] ?? "").isEmpty {
            return flowError("DM-60002", "Field empty", "\(name) is empty")
        }
        if needsDeviceData && (inputs["deviceData"] ?? "").isEmpty {
            return flowError("DR-60005", "Device data missing", "deviceData is required by the device policy")
        }
        // Standard base64 (padded, no url-safe characters) of a DER SPKI of a P-256 key.
        guard let spki = try? Base64.decode(inputs["publicKey"]!, alphabet: .standard, padding: .required), let key = try? P256PublicKey(spki: spki) else {
            return flowError("DR-60002", "Invalid public key", "publicKey must be standard base64 of a DER SubjectPublicKeyInfo of a P-256 key")
        }
        // A DER ECDSA-SHA256 signature over the decoded challenge (not over its base64 text).
        guard let der = try? Base64.decode(inputs["signature"]!, alphabet: .standard, padding: .required), let signature = try? ECDSASignature(der: der),
              key.isValidSignature(signature, for: SHA256.hash(flow.challenge ?? [])) else {
            return flowError("DR-60002", "Invalid signature", "signature must be standard base64 DER ECDSA-SHA256 over the decoded challenge")
        }
        var claims: JSONObject?
        if needsDeviceData {
            switch verifyToken(inputs["deviceData"]!, key: key) {
            case let .failure(reason):
                return flowError(reason.code, "Invalid device data", reason.description)
            case let .success(verified):
                claims = verified
            }
            let failed = settings.requiredClaims.filter { name, wanted in Self.claimText(claims?[name]) != wanted }.keys.sorted()
            if !failed.isEmpty {
                return flowError("DR-60004", "Device does not comply with the policy", "failed: " + failed.joined(separator: ", "))
            }
        }
        if let code = settings.deviceStepError {
            state.withLock { _ = $0.flows.removeValue(forKey: flowId) }
            return flowError(code, "Device registration failed", "the server refused the device step (\(code))")
        }
        // COMPLETE: only now is the device stored.
        state.withLock { state in
            state.flows.removeValue(forKey: flowId)
            state.devices.append(Device(registrationId: flow.registrationId!, user: flow.user!, publicKey: inputs["publicKey"]!,
                                        deviceModel: inputs["deviceModel"], claims: claims, deviceData: inputs["deviceData"]))
        }
        return json(200, ["flowId": .string(flowId), "flowType": .string("REGISTRATION"), "flowStatus": .string("COMPLETE"), "type": .string("VIEW"),
                          "data": .object([:])])
    }

    /// A claim as the server compares it: booleans as "true"/"false", numbers and strings as written.
    static func claimText(_ value: JSONValue?) -> String? {
        switch value {
        case let .string(text)?: text
        case let .bool(flag)?: flag ? "true" : "false"
        case let value?: value.int64Value.map(String.init)
        case nil: nil
        }
    }

    struct TokenRefusal: Error, CustomStringConvertible {
        let code: String
        let description: String
    }

    /// An ES256 JWS (deviceData, a device token) as the server reads it: signed by `key` with a
    /// raw 64-byte signature, flat claims, a `jti` not seen before (one replay store for both),
    /// an `iat` at most 5 minutes old and at most 30 s ahead of the server's clock.
    private func verifyToken(_ token: String, key: P256PublicKey) -> Result<JSONObject, TokenRefusal> {
        let claims: JSONObject
        do {
            guard let verified = try ES256Verifier(publicKey: key).verify(compact: token, freshness: (maxAge: 300, now: Int64(now.rounded(.down)))).claims else {
                return .failure(TokenRefusal(code: "DR-60002", description: "the claims are not a JSON object"))
            }
            claims = verified
        } catch {
            return .failure(TokenRefusal(code: "DR-60002", description: "\(error)"))
        }
        let nested = claims.members.filter { $0.value.objectValue != nil || $0.value.arrayValue != nil }.map(\.key)
        if !nested.isEmpty {
            return .failure(TokenRefusal(code: "DR-60004", description: "claims must be flat; nested: " + nested.joined(separator: ", ")))
        }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else {
            return .failure(TokenRefusal(code: "DR-60002", description: "jti is missing or not a string"))
        }
        guard state.withLock({ $0.usedJTIs.insert(jti).inserted }) else {
            return .failure(TokenRefusal(code: "DR-60002", description: "jti \(jti) was already used"))
        }
        return .success(claims)
    }

    /// What the server does with a device token at sign-in (`X-Device-Token`, `device_token`): its
    /// header's `deviceId` names a stored device, whose key verifies it (`verifyToken`).
    public func deviceCheck(_ token: String) -> DeviceCheck {
        guard let header = try? ParsedJWS(compact: token).header, let deviceId = header["deviceId"]?.stringValue else {
            return DeviceCheck(accepted: false, reason: "malformed device token, or no deviceId in its header", deviceId: nil, claims: nil)
        }
        guard let device = devices.first(where: { $0.registrationId == deviceId }),
              let key = try? P256PublicKey(spki: Base64.decode(device.publicKey, alphabet: .standard, padding: .required)) else {
            return DeviceCheck(accepted: false, reason: "unknown deviceId \(deviceId)", deviceId: deviceId, claims: nil)
        }
        switch verifyToken(token, key: key) {
        case let .failure(refusal): return DeviceCheck(accepted: false, reason: refusal.description, deviceId: deviceId, claims: nil)
        case let .success(claims): return DeviceCheck(accepted: true, reason: nil, deviceId: deviceId, claims: claims)
        }
    }

    // MARK: - Sign-in (server contract, section 4b; RFC 6749, 8628)

    private var discovery: JSONObject {
        ["issuer": .string(issuer), "authorization_endpoint": .string(base + "/oauth2/authorize"), "token_endpoint": .string(base + "/oauth2/token"),
         "revocation_endpoint": .string(base + "/oauth2/revoke"), "device_authorization_endpoint": .string(base + "/oauth2/device_authorize"),
         "jwks_uri": .string(base + "/oauth2/jwks"), "code_challenge_methods_supported": .array([.string("S256")]),
         "grant_types_supported": .array(["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"].map { .string($0) })]
    }

    private func deviceAuthorize(_ form: [String: String]) -> HTTPResponse {
        guard form["client_id"] == Self.clientID else { return oauthError(401, "invalid_client", "unknown client") }
        let deviceCode = Base64URL.encode((try? SystemRandom().bytes(count: 32)) ?? [])
        let now = now
        let settings = state.withLock { state in
            state.grants.append(Grant(deviceCode: deviceCode, created: now, interval: state.settings.deviceInterval ?? PollingLoop.defaultInterval))
            return state.settings
        }
        var answer: JSONObject = ["device_code": .string(deviceCode), "user_code": .string("WDJB-MJHT"), "verification_uri": .string(base + "/device"),
                                  "verification_uri_complete": .string(base + "/device?user_code=WDJB-MJHT"), "expires_in": .integer(settings.deviceExpiresIn)]
        if let interval = settings.deviceInterval { answer["interval"] = .integer(interval) }
        return json(200, answer)
    }

    private func token(_ form: [String: String], url: String) throws(HTTPError) -> HTTPResponse {
        guard form["client_id"] == Self.clientID else { return oauthError(401, "invalid_client", "unknown client") }
        switch form["grant_type"] {
        case "urn:ietf:params:oauth:grant-type:device_code"?:
            return try poll(form["device_code"] ?? "", url: url)
        case "refresh_token"?:
            let known = state.withLock { state in
                state.refreshes += 1
                return !state.settings.refuseRefresh && state.refreshTokens.remove(form["refresh_token"] ?? "") != nil
            }
            guard known else { return oauthError(400, "invalid_grant", "unknown, used or revoked refresh token") }
            return issue(scope: "openid")
        default:
            return oauthError(400, "unsupported_grant_type", "grant \(form["grant_type"] ?? "(none)")")
        }
    }

    /// A device-code poll: refused when it comes sooner than the grant's interval (which grows by
    /// 5 s with each `slow_down`), ended when the grant's life is over, else the next of `polls`.
    private func poll(_ deviceCode: String, url: String) throws(HTTPError) -> HTTPResponse {
        let now = now
        enum Outcome { case unknown, tooSoon, expired, answer(Poll) }
        let outcome: Outcome = state.withLock { state in
            guard let index = state.grants.firstIndex(where: { $0.deviceCode == deviceCode && !$0.done }) else { return .unknown }
            let grant = state.grants[index]
            state.grants[index].polls.append(now)
            if now - grant.created > Double(state.settings.deviceExpiresIn) { return .expired }
            if now - (grant.polls.last ?? grant.created) < Double(grant.interval) {
                state.pollsTooSoon += 1
                state.grants[index].interval += 5
                return .tooSoon
            }
            let answer = state.settings.polls.isEmpty ? .pending : state.settings.polls.removeFirst()
            if answer == .slowDown { state.grants[index].interval += 5 }
            if answer == .approve || answer == .deny || answer == .expire { state.grants[index].done = true }
            return .answer(answer)
        }
        switch outcome {
        case .unknown: return oauthError(400, "invalid_grant", "unknown or used device_code")
        case .tooSoon, .answer(.slowDown): return oauthError(400, "slow_down", "polling too fast")
        case .expired, .answer(.expire): return oauthError(400, "expired_token", "the device code expired")
        case .answer(.pending): return oauthError(400, "authorization_pending", "waiting for the user")
        case .answer(.deny): return oauthError(400, "access_denied", "the user denied the request")
        case .answer(.unavailable): return oauthError(503, "temporarily_unavailable", "the server is overloaded; try again later")
        case .answer(.noAnswer): throw .transport(url: url, failure: .noResponse, detail: "Empty reply from server")
        case .answer(.approve): return issue(scope: "openid")
        }
    }

    /// New tokens for the user: an access token, a refresh token (the one used before is gone),
    /// and an ID token signed with `signingKey`.
    private func issue(scope: String) -> HTTPResponse {
        let access = Base64URL.encode((try? SystemRandom().bytes(count: 32)) ?? [])
        let refresh = Base64URL.encode((try? SystemRandom().bytes(count: 32)) ?? [])
        let lifetime = state.withLock { state in
            state.accessTokens.insert(access)
            state.refreshTokens.insert(refresh)
            return state.settings.accessTokenLifetime
        }
        let issued = Int64(now.rounded(.down))
        let claims: JSONObject = ["iss": .string(issuer), "sub": .string("user-alice"), "aud": .string(Self.clientID), "iat": .integer(issued),
                                  "exp": .integer(issued + 3600), "name": .string("Alice Example"), "preferred_username": .string(Self.user.email)]
        let idToken = (try? CompactJWS.sign(header: ["alg": .string("ES256"), "typ": .string("JWT"), "kid": .string("fake-1")], payload: claims, with: signingKey)) ?? ""
        return json(200, ["access_token": .string(access), "token_type": .string("Bearer"), "expires_in": .integer(lifetime),
                          "refresh_token": .string(refresh), "scope": .string(scope), "id_token": .string(idToken)])
    }

    // MARK: - Date

    /// IMF-fixdate (RFC 9110 5.6.7) of a time in seconds since the epoch.
    static func httpDate(_ seconds: Double) -> String {
        let total = Int64(seconds.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let secondOfDay = total - days * 86_400
        // Civil from days (Howard Hinnant's algorithm).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int(((days % 7) + 7) % 7)]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(day)) \(months[Int(month - 1)]) \(year) \(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }
}
