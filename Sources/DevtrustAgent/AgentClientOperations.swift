import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustKeystore

/// The operations of the commands beyond `token`, `status` and `register` (`sign-challenge`,
/// `device-data`, `dpop-proof` and a DPoP sign-in's proofs, a sign-in's device token, `reset`): each
/// decided here from who the kernel says asks, with the machine key, and nothing a client sends
/// taken as more than the bounded fields `AgentRequest` read.
extension AgentService {
    /// An operation's result, and what its audit line says beyond the operation.
    struct ClientAnswer {
        var result: JSONObject
        var server: String?
        var jti: String?
        var outcome = "ok"
    }

    func answerClient(_ peer: AgentPeer, user: AgentUsers.User, _ request: AgentRequest) throws -> ClientAnswer {
        switch request {
        case let .signChallenge(challenge):
            // The guard is applied here, whatever the client checked: it never makes the machine key sign chosen bytes.
            let bytes = try ChallengePolicy.signableChallenge(challenge)
            let signature = try store(for: peer, user).loadKey().key.sign(message: bytes)
            return ClientAnswer(result: ["signature": .string(Base64.encode(signature.der))])
        case let .deviceData(claims):
            let added = try allowedClaims(claims)
            let store = store(for: peer, user)
            let deviceData = try tokens(for: peer, user: user, store: store).mintedDeviceData(addedClaims: added)
            return ClientAnswer(result: ["deviceData": .string(deviceData.token)], jti: deviceData.jti)
        case let .dpopProof(method, url, nonce, accessTokenHash):
            // Read as a proof may carry them (AgentRequest): the header and every claim's name are written here.
            let device = try store(for: peer, user).loadKey()
            let proof = try DPoPProofMinter(key: device.key, clock: settings.clock, random: settings.random)
                .mintedProof(method: method, url: url, nonce: nonce, accessTokenHash: accessTokenHash)
            return ClientAnswer(result: ["proof": .string(proof.token), "jkt": .string(device.key.publicKey.thumbprint)], jti: proof.jti)
        case let .signInToken(choice, destinations):
            return try signInToken(peer, user: user, choice: choice, destinations: destinations)
        case let .forgetRegistrations(uid):
            if let uid {
                // Root's, for a departed account (or any uid): every registration of the uid, whoever had it.
                guard peer.uid == 0 else { throw AgentForgettingAnothers(uid: uid) }
                let forgotten = try store(for: peer, user).forgetRegistrations(of: RegistrationHolder(uid: uid))
                pending.removeAll { $0.uid == uid }
                return ClientAnswer(result: ["forgotten": .array(forgotten.map { .object($0.keystoreObject) })],
                                    outcome: "ok: forgot \(forgotten.count) registration(s) of uid \(uid)")
            }
            let holder = Self.holder(peer, user)
            let forgotten = try store(for: peer, user).forgetRegistrations(of: holder)
            pending.removeAll { $0.holder == holder }
            let shown = forgotten.map { JSONValue.object($0.withoutHolder.keystoreObject) }
            return ClientAnswer(result: ["forgotten": .array(shown)], outcome: "ok: forgot \(forgotten.count) registration(s)")
        case .publicKey, .status, .token, .registrationStep, .registrationComplete:
            throw AgentProtocolError("\(request.operation) is not one of the client operations")
        }
    }

    /// A sign-in's device token, for one of the caller's registrations only, chosen as the command
    /// line chooses it (`DeviceTokenService.signInDeviceToken`); a sign-in without one says why.
    private func signInToken(_ peer: AgentPeer, user: AgentUsers.User, choice: RegistrationChoice, destinations: [String]) throws -> ClientAnswer {
        switch choice {
        case .server, .provider: break
        case .deviceID, .chosen:
            // Never from a client: a registration it describes is not one the agent looked up as the caller's.
            throw AgentProtocolError("a sign-in's device token is chosen by its server or its provider")
        }
        let store = store(for: peer, user)
        switch try tokens(for: peer, user: user, store: store).signInDeviceToken(for: choice, sendingTo: destinations) {
        case let .token(token):
            return ClientAnswer(result: ["token": .string(token.token)], jti: token.jti)
        case let .withoutToken(error):
            let reason = switch error {
            case .noDeviceKey: "noDeviceKey"
            case .notRegistered: "notRegistered"
            case .tokenGoesElsewhere: "tokenGoesElsewhere"
            default: "other"
            }
            var without: JSONObject = ["reason": .string(reason), "message": .string(error.description)]
            if case .noDeviceKey = error { without["keystore"] = .string(settings.keystore.path) }
            return ClientAnswer(result: ["withoutToken": .object(without)], outcome: "ok: no token (\(reason))")
        }
    }
}

/// A user other than root named a uid to forget the registrations of (exit 3).
struct AgentForgettingAnothers: Error, CustomStringConvertible, ClassifiedError {
    let uid: UInt32

    var description: String { classification.message }

    var classification: ErrorClassification {
        ErrorClassification(.notPermitted, summary: "only root has the devtrust agent forget another uid's registrations (uid \(uid))",
                            hint: ErrorHint("`devtrust reset` forgets your own", joinedBy: "; "))
    }
}
