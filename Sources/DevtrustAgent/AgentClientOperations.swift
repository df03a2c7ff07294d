import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE

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
            let signature = try store(for: peer).loadKey().key.sign(message: bytes)
            return ClientAnswer(result: ["signature": .string(Base64.encode(signature.der))])
        case let .deviceData(claims):
            let added = try allowedClaims(claims)
            let store = store(for: peer)
            let deviceData = try tokens(for: peer, user: user, store: store).deviceData(addedClaims: added)
            return ClientAnswer(result: ["deviceData": .string(deviceData)], jti: Self.jti(of: deviceData))
        case let .dpopProof(method, url, nonce, accessTokenHash):
            // Read as a proof may carry them (AgentRequest): the header and every claim's name are written here.
            let device = try store(for: peer).loadKey()
            let proof = try DPoPProofMinter(key: device.key, clock: settings.clock, random: settings.random)
                .proof(method: method, url: url, nonce: nonce, accessTokenHash: accessTokenHash)
            return ClientAnswer(result: ["proof": .string(proof), "jkt": .string(device.key.publicKey.thumbprint)], jti: Self.jti(of: proof))
        case let .signInToken(choice, destinations):
            return try signInToken(peer, user: user, choice: choice, destinations: destinations)
        case .forgetRegistrations:
            let forgotten = try store(for: peer).forgetRegistrations(of: peer.uid)
            pending.removeAll { $0.uid == peer.uid }
            let shown = forgotten.map { record -> JSONValue in
                var record = record
                record.uid = nil
                return .object(record.keystoreObject)
            }
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
        let store = store(for: peer)
        switch try tokens(for: peer, user: user, store: store).signInDeviceToken(for: choice, sendingTo: destinations) {
        case let .token(token):
            return ClientAnswer(result: ["token": .string(token)], jti: Self.jti(of: token))
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
