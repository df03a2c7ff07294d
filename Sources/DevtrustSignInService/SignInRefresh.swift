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

/// A stored sign-in's tokens with a valid access token: `access-token`, and any front end that hands
/// a sign-in's access token out.
package enum SignInRefresh {
    /// An access token that expires within this many seconds is refreshed first.
    package static let margin: Int64 = 60
    /// How long a refresh waits for another caller's (on the keystore's lock): longer than one HTTP request.
    package static let lockTimeoutMilliseconds = 60_000

    /// `record`'s tokens, refreshed first when the access token expires within `margin` or, `forced`,
    /// in any case (a resource's 401 says more than an expiry devtrust assumed). `oauth` refreshes;
    /// a DPoP-bound sign-in is refreshed with a proof of its key (`dpop`: the binding for the sign-in's
    /// thumbprint and token endpoint; RFC 9449 section 5). `refreshing`: said when a refresh starts.
    package static func freshTokens(_ record: SignInRecord, in store: DeviceStore, oauth: OAuthClient, forced: Bool,
                                    dpop: (_ jkt: String, _ tokenEndpoint: String) throws -> DPoPBinding,
                                    refreshing: () -> Void) throws -> TokenSet {
        var keystore = store.keystore
        keystore.lockTimeoutMilliseconds = lockTimeoutMilliseconds
        if forced, try store.tokens(of: record).refreshToken == nil {
            throw DeviceError.refreshFailed(place: record.server ?? record.discovery ?? "the server", reason: "the server gave no refresh token", mayPass: false)
        }
        return try DeviceStore(keystore: keystore, clock: store.clock, tpm: store.tpm, random: store.random)
            .freshTokens(record, margin: forced ? Int64.max / 2 : margin) { current in
                refreshing()
                var client = oauth
                if let jkt = current.dpopJkt { client.dpop = try dpop(jkt, current.tokenEndpoint) }
                return try RefreshOutcome.of { try client.refresh(current, clientID: record.clientId) }
            }
    }
}
