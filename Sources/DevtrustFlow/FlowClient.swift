import DevtrustEncoding
import DevtrustHTTP

/// The Flow Execution API over the shared HTTP layer:
/// `POST {server}/api/server/v1/flow/execute`.
public struct FlowClient: Sendable {
    public let server: ServerURL
    public let http: any HTTPClient

    public init(server: ServerURL, http: any HTTPClient) {
        self.server = server
        self.http = http
    }

    public var endpoint: String { server.appending("/api/server/v1/flow/execute") }

    /// Starts a flow: `{"flowType": ..., "applicationId": ...}`.
    public func start(flowType: String, applicationId: String?) throws -> FlowStep {
        var body: JSONObject = ["flowType": .string(flowType)]
        if let applicationId { body["applicationId"] = .string(applicationId) }
        return try post(body)
    }

    /// Continues a flow: `{"flowId", "actionId"?, "inputs": {string: string}}`.
    public func proceed(flowId: String, actionId: String?, inputs: [(String, String)]) throws -> FlowStep {
        var body: JSONObject = ["flowId": .string(flowId)]
        if let actionId { body["actionId"] = .string(actionId) }
        var values = JSONObject()
        for (name, value) in inputs { values[name] = .string(value) }
        body["inputs"] = .object(values)
        return try post(body)
    }

    private func post(_ body: JSONObject) throws -> FlowStep {
        let response = try http.send(HTTPRequest(method: "POST", url: endpoint, headers: [
            ("Content-Type", "application/json"), ("Accept", "application/json"),
        ], body: JSONWriter.bytes(.object(body))))
        guard (200..<300).contains(response.status) else {
            if let error = FlowStepParser.serverError(response.body, status: response.status) { throw error }
            throw FlowProtocolError("\(response.statusSummary) without an error body: \(response.bodyPreview)")
        }
        return try FlowStepParser.parse(response.body)
    }
}
