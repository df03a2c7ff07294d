import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys

/// Answers the Device Registration step (INTERNAL_PROMPT): proves possession
/// of the device key over the server's challenge and describes the device.
public struct DeviceRegistrationResponder: Sendable {
    /// What devtrust knows how to provide; anything else is refused, never guessed.
    public static let knownParams: Set<String> = ["publicKey", "signature", "deviceData", "deviceModel"]

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
        let unknown = step.requiredParams.filter { !Self.knownParams.contains($0) }
        guard unknown.isEmpty else {
            throw FlowUnsupportedError("the server's Device Registration step requires \(unknown.joined(separator: ", ")), which devtrust does not provide (it sends publicKey, signature, deviceData, deviceModel); nothing was registered")
        }
        guard let registrationId = step.additionalData["registrationId"], !registrationId.isEmpty else {
            throw FlowProtocolError("the Device Registration step has no additionalData.registrationId")
        }
        guard let challengeText = step.additionalData["challenge"], !challengeText.isEmpty else {
            throw FlowProtocolError("the Device Registration step has no additionalData.challenge")
        }
        let challenge: [UInt8]
        do {
            challenge = try Base64URL.decode(challengeText, padding: .optional)
        } catch {
            throw FlowProtocolError("the Device Registration challenge is not base64url (\(error))")
        }
        if let refusal = ChallengePolicy.registrationRefusal(challenge) {
            throw FlowProtocolError("devtrust refuses to sign the server's Device Registration challenge: \(refusal); nothing was sent. Run the registration again: a new attempt gets a new challenge (a random one is refused far less than once in 10,000, so if this repeats, the server is not sending random challenges: tell its administrator)")
        }
        let key = minter.key
        var inputs: [(String, String)] = [
            ("publicKey", key.publicKey.spkiBase64),
            ("signature", Base64.encode(try key.sign(message: challenge).der)),
        ]
        if step.requiredParams.contains("deviceData") {
            inputs.append(("deviceData", try minter.deviceData(attributes: attributes)))
        }
        if let deviceModel, !deviceModel.isEmpty {
            inputs.append(("deviceModel", deviceModel))
        }
        return (registrationId, inputs)
    }
}
