import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore

/// What the front ends ask the agent beyond the public key and a token, each one request: a
/// challenge's signature, device data, a sign-in's device token, forgetting the caller's
/// registrations, the caller's view of the machine keystore; and the DPoP proofs it writes.
extension AgentClient {
    /// The reply's `field` as a string, or the error that the agent did not answer as it does.
    func string(_ result: JSONObject, _ field: String) throws(AgentUnavailable) -> String {
        guard let value = result[field]?.stringValue else { throw AgentUnavailable(socket: socket, reason: .unreadableReply("no \(field) in its answer")) }
        return value
    }

    /// The agent's DER signature over a challenge (base64url text): one its challenge guard allows,
    /// else its refusal (exit 2, as with a keystore of one's own).
    public func signChallenge(_ challenge: String) throws -> [UInt8] {
        let signature = try string(try call(.signChallenge(challenge: challenge)), "signature")
        guard let der = try? Base64.decode(signature, padding: .required), !der.isEmpty else {
            throw AgentUnavailable(socket: socket, reason: .unreadableReply("its signature is not base64"))
        }
        return der
    }

    /// A deviceData JWT: the agent's collectors, with the claims its policy lets clients add.
    public func deviceData(claims: [(String, String)]) throws -> String {
        try string(try call(.deviceData(claims: claims.map { GivenClaim(name: $0.0, value: $0.1) })), "deviceData")
    }

    /// What the agent answered for a sign-in's device token.
    public enum SignInToken: Equatable, Sendable {
        case token(String)
        /// The machine keystore (`keystore`) has no key yet.
        case noMachineKey(AgentNoMachineKey)
        /// No registration of the caller's there (`notRegistered`), one whose token would go to
        /// another origin (`tokenGoesElsewhere`), or another reason; `message` says it.
        case withoutToken(reason: String, message: String)
    }

    /// The device token a sign-in carries: for the caller's registration `choice` names, when every
    /// URL it goes to (`destinations`) is on that registration's origin; else why not.
    public func signInToken(_ choice: RegistrationChoice, destinations: [String]) throws -> SignInToken {
        let result = try call(.signInToken(choice: choice, destinations: destinations))
        if let token = result["token"]?.stringValue { return .token(token) }
        guard let without = result["withoutToken"]?.objectValue, let reason = without["reason"]?.stringValue,
              let message = without["message"]?.stringValue else {
            throw AgentUnavailable(socket: socket, reason: .unreadableReply("neither a token nor why not in its answer"))
        }
        if reason == "noDeviceKey" { return .noMachineKey(AgentNoMachineKey(socket: socket, keystore: without["keystore"]?.stringValue ?? "?")) }
        return .withoutToken(reason: reason, message: message)
    }

    /// `reset` as a user: the agent forgets the caller's registrations; with `uid` (root only), that
    /// uid's, whichever account made them. Those it forgot (with their uid and account when named).
    public func forgetRegistrations(uid: UInt32? = nil) throws -> [JSONObject] {
        let result = try call(.forgetRegistrations(uid: uid))
        guard let forgotten = result["forgotten"]?.arrayValue else {
            throw AgentUnavailable(socket: socket, reason: .unreadableReply("no forgotten registrations in its answer"))
        }
        return forgotten.compactMap(\.objectValue)
    }
}

/// The DPoP proofs of the machine key, made by the system agent: it writes the header (`typ`
/// `dpop+jwt`, the key's `jwk`) and every claim; this side gives only the request's method and URL,
/// the server's nonce and the access token's hash. Proofs are in this machine's time: the agent
/// measures no server's clock.
public struct AgentDPoPProofs: DPoPProofSigning {
    public let agent: AgentClient
    public let thumbprint: String

    /// The agent's proofs, for its key as it is now (one request: its public key).
    public init(agent: AgentClient) throws {
        self.agent = agent
        thumbprint = try agent.publicKey().thumbprint
    }

    /// The agent's proofs for tokens bound to `thumbprint` (a sign-in's `dpopJkt`): each proof is
    /// refused when the agent's key is another (`DeviceError.dpopKeyChanged`), as with a key of one's own.
    public init(agent: AgentClient, boundTo thumbprint: String) {
        self.agent = agent
        self.thumbprint = thumbprint
    }

    public func proof(method: String, url: String, nonce: String?, accessToken: String?) throws -> String {
        let result = try agent.call(.dpopProof(method: method, url: url, nonce: nonce, accessTokenHash: accessToken.map(DPoPProofMinter.accessTokenHash)))
        let proof = try agent.string(result, "proof")
        // The machine key replaced since: a proof of another key would only be refused at the server.
        let jkt = try agent.string(result, "jkt")
        guard jkt == thumbprint else { throw DeviceError.dpopKeyChanged(boundTo: thumbprint, deviceKey: jkt) }
        return proof
    }
}

extension AgentClient {
    /// The machine key and the caller's own registrations, as the agent's `status` tells them, in
    /// the form a keystore's state has (for the front ends that choose among registrations: the
    /// native host, `register`). The key's file is the agent's business: not named.
    public func ownState() throws -> (state: KeystoreState, keystore: String) {
        let result = try call(.status)
        var state = KeystoreState()
        if let key = result["key"]?.objectValue {
            guard let backend = key["backend"]?.stringValue.flatMap(KeyBackend.init(rawValue:)), let fingerprint = key["fingerprint"]?.stringValue else {
                throw AgentUnavailable(socket: socket, reason: .unreadableReply("its key has no backend or fingerprint"))
            }
            state.key = KeyRecord(backend: backend, file: "", fingerprint: fingerprint, createdAt: key["createdAt"]?.stringValue ?? "")
        }
        for value in result["registrations"]?.arrayValue ?? [] {
            guard let record = value.objectValue, let id = record["registrationId"]?.stringValue, let server = record["server"]?.stringValue,
                  let fingerprint = record["keyFingerprint"]?.stringValue else {
                throw AgentUnavailable(socket: socket, reason: .unreadableReply("a registration without its id, server or key"))
            }
            state.registrations.append(RegistrationRecord(registrationId: id, server: server, flowType: record["flowType"]?.stringValue ?? "",
                                                          keyFingerprint: fingerprint, registeredAt: record["registeredAt"]?.stringValue ?? ""))
        }
        return (state, result["keystore"]?.stringValue ?? "?")
    }
}

/// Through the agent, a machine keystore without a key yet (its administrator's to make).
public struct AgentNoMachineKey: Error, Equatable, Sendable, CustomStringConvertible {
    public let socket: String
    public let keystore: String

    public init(socket: String, keystore: String) {
        self.socket = socket
        self.keystore = keystore
    }

    public var description: String { classification.message }
}

extension AgentNoMachineKey: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(.noDeviceKey, summary: "the devtrust agent at \(socket) has no machine key yet (in \(keystore))",
                            hint: ErrorHint("the machine's administrator makes it: `sudo devtrust --keystore \(keystore) init`", joinedBy: "; "))
    }
}
