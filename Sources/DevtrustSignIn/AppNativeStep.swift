import DevtrustEncoding
import DevtrustHTTP

/// One answer of the app-native authentication API (server contract, section 4).
public struct AppNativeStep: Sendable {
    public let flowId: String
    public let status: String
    public let stepType: String?
    public let authenticators: [AppNativeAuthenticator]
    public let messages: [AppNativeMessage]
    public let link: String?
    public let code: String?
    public let returnedState: String?
}

extension AppNativeStep {
    /// Reads one answer of the app-native API; anything unexpected is an
    /// OAuthError (the server said no) or an OAuthProtocolError, never a crash.
    public init(response: HTTPResponse) throws {
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(response.body)
        } catch {
            if response.status >= 300 { throw OAuthProtocolError("\(response.statusSummary) without an error body: \(response.bodyPreview)") }
            throw OAuthProtocolError("the app-native answer (HTTP \(response.status)) is not JSON (\(error)): \(response.bodyPreview)")
        }
        guard case let .object(document) = parsed else {
            throw OAuthProtocolError("the app-native answer (HTTP \(response.status)) is \(parsed.kindDescription), not a JSON object")
        }
        if response.status >= 400 || document["flowStatus"] == nil {
            if let code = document["code"]?.stringValue {
                let description = document["description"]?.stringValue
                throw OAuthError(error: code, errorDescription: [document["message"]?.stringValue, description].compactMap { $0 }.joined(separator: ": "),
                                 httpStatus: response.status)
            }
            if let error = document["error"]?.stringValue {
                throw OAuthError(error: error, errorDescription: document["error_description"]?.stringValue, httpStatus: response.status)
            }
            throw OAuthProtocolError("HTTP \(response.status) without flowStatus")
        }
        guard let status = document["flowStatus"]?.stringValue else { throw OAuthProtocolError("flowStatus is not a string") }
        let nextStep = document["nextStep"]?.objectValue
        let authData = document["authData"]?.objectValue
        let links = document["links"]?.arrayValue ?? []
        let link = links.compactMap(\.objectValue).first { ($0["name"]?.stringValue ?? "authentication") == "authentication" }?["href"]?.stringValue
        let authenticators = (nextStep?["authenticators"]?.arrayValue ?? []).compactMap { element -> AppNativeAuthenticator? in
            guard let object = element.objectValue, let id = object["authenticatorId"]?.stringValue else { return nil }
            let metadata = object["metadata"]?.objectValue
            let params = (metadata?["params"]?.arrayValue ?? []).enumerated().compactMap { index, param -> AppNativeAuthenticator.Param? in
                guard let p = param.objectValue, let name = p["param"]?.stringValue else { return nil }
                let confidential = p["isConfidential"]?.boolValue ?? p["confidential"]?.boolValue ?? false
                return AppNativeAuthenticator.Param(name: name, displayName: p["displayName"]?.stringValue, confidential: confidential,
                                                    order: Int(p["order"]?.int64Value ?? Int64(index)))
            }.sorted { $0.order < $1.order }
            let additional = metadata?["additionalData"]?.objectValue
            return AppNativeAuthenticator(id: id, name: object["authenticator"]?.stringValue ?? id, idp: object["idp"]?.stringValue,
                                          promptType: metadata?["promptType"]?.stringValue, params: params,
                                          redirectURL: (additional?["redirectUrl"] ?? additional?["redirectURL"])?.stringValue)
        }
        let messages = (nextStep?["messages"]?.arrayValue ?? document["messages"]?.arrayValue ?? []).compactMap { element -> AppNativeMessage? in
            guard let object = element.objectValue, let text = object["message"]?.stringValue ?? object["i18nKey"]?.stringValue else { return nil }
            return AppNativeMessage(type: object["type"]?.stringValue ?? "INFO", message: text)
        }
        self.init(flowId: document["flowId"]?.stringValue ?? "", status: status, stepType: nextStep?["stepType"]?.stringValue,
                  authenticators: authenticators, messages: messages, link: link,
                  code: authData?["code"]?.stringValue, returnedState: authData?["state"]?.stringValue)
    }
}
