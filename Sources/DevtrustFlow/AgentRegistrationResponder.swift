import DevtrustAgent

/// The Device Registration step answered by the system agent: the step's registration id and
/// challenge go to it as the server sent them; it signs only a challenge its guard allows (a
/// refusal comes back classified as the flow's own would be), with the machine key, and builds the
/// deviceData from its own collectors. The device model is the user's to name.
public struct AgentRegistrationResponder: DeviceRegistrationAnswering {
    public let agent: AgentClient
    public let server: String
    public let claims: [(String, String)]
    public let deviceModel: String?

    public init(agent: AgentClient, server: String, claims: [(String, String)], deviceModel: String?) {
        self.agent = agent
        self.server = server
        self.claims = claims
        self.deviceModel = deviceModel
    }

    public func answer(_ step: FlowStep) throws -> (registrationId: String, inputs: [(String, String)]) {
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
