import DevtrustHTTP
import DevtrustFlow

/// With `-v`: each request's method and URL, and the answer's status, on
/// stderr. Never headers or bodies (they carry device tokens, passwords and
/// access tokens), nor a URL's query or user part (`TransportPolicy.redacted`).
/// A command runs on one thread, as `ServerClocks` does: no lock is needed.
struct VerboseHTTPClient: HTTPClient, @unchecked Sendable {
    let inner: any HTTPClient
    let say: (String) -> Void

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let url = TransportPolicy.redacted(request.url)
        say("http: \(request.method) \(url)")
        do {
            let response = try inner.send(request)
            say("http: \(response.status) from \(request.method) \(url)")
            return response
        } catch {
            say("http: \(request.method) \(url) failed")
            throw error
        }
    }
}

/// With `-v`: each step of a registration flow, the inputs it asks for and
/// the action taken, by name (never the values typed or given).
final class VerboseFlowInteraction: FlowInteraction {
    let inner: any FlowInteraction
    let say: (String) -> Void
    private var count = 0

    init(_ inner: any FlowInteraction, say: @escaping (String) -> Void) {
        self.inner = inner
        self.say = say
    }

    func answer(view step: FlowStep) throws -> ViewAnswer {
        count += 1
        let inputs = step.inputs.compactMap(\.identifier)
        let actions = step.buttons.compactMap { $0.actionId ?? $0.id }
        say("flow step \(count): VIEW asking for " + (inputs.isEmpty ? "no inputs" : inputs.joined(separator: ", "))
            + (actions.isEmpty ? "" : "; actions " + actions.joined(separator: ", ")))
        let answer = try inner.answer(view: step)
        say("flow step \(count): answering with " + (answer.actionId.map { "action \($0)" } ?? "no action")
            + (answer.inputs.isEmpty ? "" : " and inputs " + answer.inputs.map(\.0).joined(separator: ", ")))
        return answer
    }

    func callback(redirectURL: String, step: FlowStep) throws -> [(String, String)] {
        count += 1
        say("flow step \(count): REDIRECTION to \(TransportPolicy.redacted(redirectURL))")
        return try inner.callback(redirectURL: redirectURL, step: step)
    }

    func note(_ text: String) {
        count += 1
        say("flow step \(count): INTERNAL_PROMPT (Device Registration)")
        inner.note(text)
    }
}
