import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys

/// What answers the Device Registration step: the key in a keystore of one's own
/// (`DeviceRegistrationResponder`), or the system agent for a client.
public protocol DeviceRegistrationAnswering {
    /// The registrationId (kept in memory until COMPLETE) and the inputs to send.
    func answer(_ step: FlowStep) throws -> (registrationId: String, inputs: [(String, String)])
}

/// Answers the Device Registration step (INTERNAL_PROMPT): proves possession
/// of the device key over the server's challenge and describes the device.
public struct DeviceRegistrationResponder: DeviceRegistrationAnswering, Sendable {
    /// What devtrust knows how to provide; anything else is refused, never guessed.
    public static let knownParams = RegistrationProof.knownParams

    public let minter: DeviceTokenMinter
    public let attributes: DeviceAttributes
    public let deviceModel: String?

    public init(minter: DeviceTokenMinter, attributes: DeviceAttributes, deviceModel: String?) {
        self.minter = minter
        self.attributes = attributes
        self.deviceModel = deviceModel
    }

    /// The registrationId (kept in memory until COMPLETE) and the inputs to send.
    public func answer(_ step: FlowStep) throws -> (registrationId: String, inputs: [(String, String)]) {
        let (registrationId, challengeText) = try Self.read(step)
        var inputs: [(String, String)]
        do {
            inputs = try RegistrationProof.answer(challenge: challengeText, requiredParams: step.requiredParams, minter: minter, attributes: attributes).inputs
        } catch let refusal as RegistrationProof.Refusal {
            throw Self.error(refusal)
        }
        if let deviceModel, !deviceModel.isEmpty {
            inputs.append(("deviceModel", deviceModel))
        }
        return (registrationId, inputs)
    }

    /// The step's registration id and challenge, once it asks only for what devtrust provides.
    public static func read(_ step: FlowStep) throws -> (registrationId: String, challenge: String) {
        let unknown = step.requiredParams.filter { !knownParams.contains($0) }
        guard unknown.isEmpty else { throw error(.unknownParameters(unknown)) }
        guard let registrationId = step.additionalData["registrationId"], !registrationId.isEmpty else {
            throw FlowProtocolError("the Device Registration step has no additionalData.registrationId")
        }
        guard let challenge = step.additionalData["challenge"], !challenge.isEmpty else {
            throw FlowProtocolError("the Device Registration step has no additionalData.challenge")
        }
        return (registrationId, challenge)
    }

    /// The flow's error for a refused step: a step devtrust does not take, or a challenge it does not sign.
    public static func error(_ refusal: RegistrationProof.Refusal) -> any Error {
        if case .unknownParameters = refusal { return FlowUnsupportedError(refusal.message) }
        return FlowProtocolError(refusal.message)
    }
}
