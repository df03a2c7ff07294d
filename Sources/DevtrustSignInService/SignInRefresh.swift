import DevtrustDevice
import DevtrustHTTP
import DevtrustKeystore
import DevtrustSignIn

extension RefreshOutcome {
    /// What a refresh's answer means for the stored sign-in. Only a dead grant
    /// (`invalid_grant` in the token endpoint's own error body) drops it; an
    /// outage, a proxy's answer or another refusal keeps it. A URL devtrust
    /// refuses, or any other error, passes through (and keeps it too).
    package static func of(_ refresh: () throws -> TokenSet) throws -> RefreshOutcome {
        do {
            return .renewed(try refresh())
        } catch let error as OAuthError where error.meansGrantIsDead {
            return .refused(reason: error.description)
        } catch let error as OAuthError {
            return .failed(reason: error.description, mayPass: error.mayPass)
        } catch let error as OAuthProtocolError {
            // Not `error.mayPass` (which tells device-code polling whether to poll again): a 404 or a
            // page from the token endpoint is "a server that does not answer the protocol", exit 5
            // in the CLI contract, not the server's refusal (4). Either way the sign-in is kept.
            return .failed(reason: error.description, mayPass: true)
        } catch let error as HTTPError {
            switch error {
            case .transport, .responseTooLarge, .redirected:
                return .failed(reason: error.description, mayPass: true)
            default:
                throw error
            }
        }
    }
}
