import DevtrustAgent
import DevtrustEncoding
import DevtrustFlow
import DevtrustKeys

/// The commands' requests to the system agent, and its results read back as the commands use them.
enum AgentCalls {
    static func publicKey(_ agent: AgentClient) throws -> P256PublicKey {
        let result = try agent.call(.publicKey)
        guard let text = result["publicKey"]?.stringValue, let spki = try? Base64.decode(text, padding: .required),
              let key = try? P256PublicKey(spki: spki) else {
            throw AgentUnavailable(socket: agent.socket, reason: .unreadableReply("no public key in its answer"))
        }
        return key
    }

    static func token(_ agent: AgentClient, server: String?, deviceID: String?, claims: [(String, String)]) throws -> String {
        let result = try agent.call(.token(server: server, deviceID: deviceID, claims: claims.map { GivenClaim(name: $0.0, value: $0.1) }))
        guard let token = result["token"]?.stringValue else { throw AgentUnavailable(socket: agent.socket, reason: .unreadableReply("no token in its answer")) }
        return token
    }
}

/// The Device Registration step answered by the system agent: the step's registration id and
/// challenge go to it as the server sent them; it signs only a challenge its guard allows (a
/// refusal comes back classified as the flow's own would be), with the machine key, and builds the
/// deviceData from its own collectors. The device model is the user's to name.
struct AgentRegistrationResponder: DeviceRegistrationAnswering {
    let agent: AgentClient
    let server: String
    let claims: [(String, String)]
    let deviceModel: String?

    func answer(_ step: FlowStep) throws -> (registrationId: String, inputs: [(String, String)]) {
        let (registrationId, challenge) = try DeviceRegistrationResponder.read(step)
        let result = try agent.call(.registrationStep(server: server, registrationID: registrationId, challenge: challenge,
                                                      requiredParams: step.requiredParams,
                                                      claims: claims.map { GivenClaim(name: $0.0, value: $0.1) }))
        var inputs = [(String, String)]()
        for name in ["publicKey", "signature", "deviceData"] {
            if let value = result[name]?.stringValue { inputs.append((name, value)) }
        }
        guard inputs.count >= 2 else { throw AgentUnavailable(socket: agent.socket, reason: .unreadableReply("no public key and signature in its answer")) }
        if let deviceModel, !deviceModel.isEmpty { inputs.append(("deviceModel", deviceModel)) }
        return (registrationId, inputs)
    }
}
