import DevtrustDevice
import DevtrustSignIn

/// `logout`: revokes the stored tokens where the server allows it (RFC 7009), then deletes them.
enum LogoutCommand {
    static func run(_ context: CommandContext) throws {
        let store = try context.deviceStore()
        let record = try store.signIn(server: context.arguments.value("server"), discovery: context.arguments.value("discovery"))
        let clock = context.environment.clock
        let oauth = OAuthClient(http: CurlHTTPClientFactory.make(context), clock: { clock.secondsSinceEpoch() })
        let tokens = try? store.tokens(of: record)
        var revoked = [String]()
        if let tokens {
            if let refresh = tokens.refreshToken {
                if oauth.revoke(refresh, hint: "refresh_token", clientID: record.clientId, endpoint: tokens.revocationEndpoint)
                    || oauth.deleteRefreshToken(refresh, clientID: record.clientId, tokenEndpoint: tokens.tokenEndpoint) {
                    revoked.append("refresh token")
                }
            }
            if oauth.revoke(tokens.accessToken, hint: "access_token", clientID: record.clientId, endpoint: tokens.revocationEndpoint) {
                revoked.append("access token")
            }
        }
        try store.removeSignIn(record)
        let place = record.server ?? record.discovery ?? "?"
        if revoked.isEmpty {
            context.info("deleted the sign-in at \(place) (the server did not accept a revocation; the tokens stay valid there until they expire)")
        } else {
            context.info("revoked the \(revoked.joined(separator: " and ")) and deleted the sign-in at \(place)")
        }
    }
}
