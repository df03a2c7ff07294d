/// What a VIEW step is answered with.
public struct ViewAnswer: Sendable {
    public let actionId: String?
    public let inputs: [(String, String)]

    public init(actionId: String?, inputs: [(String, String)]) {
        self.actionId = actionId
        self.inputs = inputs
    }
}

/// The user's side of a flow: a terminal, or inputs given up front.
public protocol FlowInteraction: AnyObject {
    /// Shows a VIEW step and returns the chosen button and the inputs.
    func answer(view step: FlowStep) throws -> ViewAnswer
    /// Shows the URL of a REDIRECTION step; returns the callback's inputs (code, state).
    func callback(redirectURL: String, step: FlowStep) throws -> [(String, String)]
    /// Progress for the user (stderr).
    func note(_ text: String)
}

public struct RegistrationResult: Sendable, Equatable {
    public let registrationId: String
    public let flowType: String
    public let steps: Int
}

/// Walks a flow to COMPLETE: VIEW and REDIRECTION steps through the
/// interaction, the Device Registration step itself. Only a flow that reaches
/// COMPLETE after a device step yields a result; the caller records it then.
public struct RegistrationDriver {
    public static let maximumSteps = 50

    public let client: FlowClient
    public let responder: any DeviceRegistrationAnswering
    public let interaction: any FlowInteraction

    public init(client: FlowClient, responder: any DeviceRegistrationAnswering, interaction: any FlowInteraction) {
        self.client = client
        self.responder = responder
        self.interaction = interaction
    }

    public func run(flowType: String, applicationId: String?) throws -> RegistrationResult {
        var step = try client.start(flowType: flowType, applicationId: applicationId)
        var registrationId: String?
        for count in 1...Self.maximumSteps {
            if step.status == .complete {
                guard let registrationId else {
                    throw FlowUnsupportedError("the \(flowType) flow completed without a Device Registration step, so the device was not registered; ask the administrator to add the step to the flow (or check --flow-type)")
                }
                return RegistrationResult(registrationId: registrationId, flowType: step.flowType ?? flowType, steps: count)
            }
            switch step.type ?? "" {
            case "VIEW":
                let answer = try interaction.answer(view: step)
                step = try client.proceed(flowId: step.flowId, actionId: answer.actionId, inputs: answer.inputs)
            case "REDIRECTION":
                guard let url = step.redirectURL, !url.isEmpty else { throw FlowProtocolError("a REDIRECTION step without data.redirectURL") }
                let inputs = try interaction.callback(redirectURL: url, step: step)
                step = try client.proceed(flowId: step.flowId, actionId: nil, inputs: inputs)
            case "INTERNAL_PROMPT":
                let answer = try responder.answer(step)
                registrationId = answer.registrationId
                interaction.note("answering the Device Registration step (device id \(answer.registrationId))")
                step = try client.proceed(flowId: step.flowId, actionId: nil, inputs: answer.inputs)
            case "WEBAUTHN", "PASSKEY":
                throw FlowUnsupportedError("not supported by devtrust: \(step.type!) (a passkey step needs a browser); use a flow without it for this device")
            default:
                throw FlowUnsupportedError("not supported by devtrust: \(step.type ?? "(no type)") (a step type devtrust does not know)")
            }
        }
        throw FlowProtocolError("the flow did not finish after \(Self.maximumSteps) steps")
    }
}
