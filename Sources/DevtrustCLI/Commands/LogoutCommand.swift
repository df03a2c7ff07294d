import DevtrustDevice
import DevtrustSignIn

/// `logout`: revokes the stored tokens where the server allows it (RFC 7009), then deletes them.
enum LogoutCommand {
    static func run(_ context: CommandContext) throws {
        let store = try context.deviceStore()
        let record = try store.signIn(server: context.arguments.value("server"), discovery: context.arguments.value("discovery"))
        let oauth = CurlHTTPClientFactory.oauth(context, http: try CurlHTTPClientFactory.make(context))
        let tokens = try? store.tokens(of: record)
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
        try store.removeSignIn(record)
        let place = record.server ?? record.discovery ?? "?"
        let revoked = outcomes.filter { $0.outcome == .revoked }.map(\.what)
        context.info((revoked.isEmpty ? "" : "revoked the \(revoked.joined(separator: " and ")) and ") + "deleted the sign-in at \(place)")
        // What was not revoked stays valid at the server: say why, in words that tell a refusal from a network failure.
        for (what, outcome) in outcomes {
            switch outcome {
            case .revoked: break
            case .notOffered:
                context.warn("the \(what) was not revoked: the server offers no revocation endpoint; it stays valid there until it expires")
            case let .refused(reason):
                context.warn("the \(what) was not revoked: \(reason); it stays valid there until it expires")
            case let .unreachable(reason):
                context.warn("the \(what) was not revoked: \(reason); it stays valid there until it expires")
            }
        }
    }
}
