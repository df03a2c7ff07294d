import DevtrustDevice
import DevtrustKeystore
import DevtrustSignIn

/// Revoking a stored sign-in's tokens at its server (RFC 7009, else WSO2's
/// token deletion for a refresh token): the one place `logout` and `reset` do it.
package struct SignInRevocation {
    /// Each token tried, and what the server made of it.
    package let outcomes: [(what: String, outcome: OAuthClient.Revocation)]
    /// Where the sign-in is (its server, or its discovery URL).
    package let place: String
    /// Its token file is missing or unreadable: nothing could be revoked.
    package let tokensUnreadable: Bool

    /// Revokes the refresh token, then the access token. `tokens` nil (its file
    /// is missing or unreadable): nothing is tried.
    package init(_ record: SignInRecord, tokens: TokenSet?, oauth: OAuthClient) {
        place = record.server ?? record.discovery ?? "?"
        tokensUnreadable = tokens == nil
        var outcomes = [(what: String, outcome: OAuthClient.Revocation)]()
        if let tokens {
            if let refresh = tokens.refreshToken {
                var outcome = oauth.revoke(refresh, hint: "refresh_token", clientID: record.clientId, endpoint: tokens.revocationEndpoint)
                if outcome != .revoked && tokens.deleteTokenGrant {
                    outcome = oauth.deleteRefreshToken(refresh, clientID: record.clientId, tokenEndpoint: tokens.tokenEndpoint)
                }
                outcomes.append(("refresh token", outcome))
            }
            outcomes.append(("access token", oauth.revoke(tokens.accessToken, hint: "access_token", clientID: record.clientId,
                                                          endpoint: tokens.revocationEndpoint)))
        }
        self.outcomes = outcomes
    }

    /// What was revoked, in words: "the refresh token and the access token".
    package var revoked: [String] { outcomes.filter { $0.outcome == .revoked }.map(\.what) }

    /// One line for each token that was not revoked: what stays valid at the
    /// server, and why, in words that tell a refusal from a network failure.
    package var failures: [String] {
        let unread = tokensUnreadable ? ["nothing was revoked: its token file cannot be read; its tokens stay valid at the server until they expire"] : []
        return unread + outcomes.compactMap { what, outcome in
            switch outcome {
            case .revoked: nil
            case .notOffered: "the \(what) was not revoked: the server offers no revocation endpoint; it stays valid there until it expires"
            case let .refused(reason), let .unreachable(reason): "the \(what) was not revoked: \(reason); it stays valid there until it expires"
            }
        }
    }
}
