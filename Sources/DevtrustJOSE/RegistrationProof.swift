import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys

/// The Device Registration step's answer (server contract, section 1): the public key, the
/// signature over the server's challenge (only one the challenge guard allows: `ChallengePolicy`),
/// and the deviceData when the step requires it. One place for it, whoever holds the key: the
/// command line's responder (`DeviceRegistrationResponder`) and the system agent.
public enum RegistrationProof {
    /// What devtrust knows how to provide; anything else is refused, never guessed.
    public static let knownParams: Set<String> = ["publicKey", "signature", "deviceData", "deviceModel"]

    /// Why the step cannot be answered as it asks.
    public enum Refusal: Error, Equatable, Sendable {
        /// It requires parameters devtrust does not provide.
        case unknownParameters([String])
        /// The challenge is not base64url.
        case challengeNotBase64URL(String)
        /// The guard refuses the challenge: `reason` says why.
        case challengeRefused(String)
    }

    /// The challenge's bytes, when the guard lets them be signed.
    public static func checkedChallenge(_ text: String) throws(Refusal) -> [UInt8] {
        let challenge: [UInt8]
        do {
            challenge = try Base64URL.decode(text, padding: .optional)
        } catch {
            throw .challengeNotBase64URL("\(error)")
        }
        if let refusal = ChallengePolicy.registrationRefusal(challenge) { throw .challengeRefused(refusal) }
        return challenge
    }

    /// The inputs the step sends: `publicKey`, `signature`, and `deviceData` when `requiredParams`
    /// has it (minted by `minter` over `attributes`), and that deviceData's `jti` (the system agent's
    /// audit names it; nil without one). The challenge is checked before anything is signed.
    public static func answer(challenge text: String, requiredParams: [String], minter: DeviceTokenMinter,
                              attributes: @autoclosure () throws -> DeviceAttributes) throws -> (inputs: [(String, String)], deviceDataJTI: String?) {
        let unknown = requiredParams.filter { !knownParams.contains($0) }
        guard unknown.isEmpty else { throw Refusal.unknownParameters(unknown) }
        let challenge = try checkedChallenge(text)
        let key = minter.key
        var inputs: [(String, String)] = [
            ("publicKey", key.publicKey.spkiBase64),
            ("signature", Base64.encode(try key.sign(message: challenge).der)),
        ]
        var jti: String?
        if requiredParams.contains("deviceData") {
            let deviceData = try minter.mintedDeviceData(attributes: try attributes())
            inputs.append(("deviceData", deviceData.token))
            jti = deviceData.jti
        }
        return (inputs, jti)
    }
}

extension RegistrationProof.Refusal: ClassifiedError {
    /// What failed and what to do, in one sentence.
    public var message: String {
        switch self {
        case let .unknownParameters(unknown):
            return "the server's Device Registration step requires \(unknown.joined(separator: ", ")), which devtrust does not provide (it sends publicKey, signature, deviceData, deviceModel); nothing was registered"
        case let .challengeNotBase64URL(detail):
            return "the Device Registration challenge is not base64url (\(detail))"
        case let .challengeRefused(reason):
            return "devtrust refuses to sign the server's Device Registration challenge: \(reason); nothing was sent. Run the registration again: a new attempt gets a new challenge (a random one is refused far less than once in 10,000, so if this repeats, the server is not sending random challenges: tell its administrator)"
        }
    }

    /// As the registration flow classifies it (`FlowUnsupportedError`, `FlowProtocolError`): a step devtrust
    /// does not take is a refusal of sorts, a server that does not answer as the contract says the network's failure.
    public var classification: ErrorClassification {
        if case .unknownParameters = self { return ErrorClassification(.serverRefused, summary: message) }
        return ErrorClassification(.network, summary: message)
    }
}
