import DevtrustDevice
import DevtrustSignIn

/// `logout`: revokes the stored tokens where the server allows it (RFC 7009), then deletes them.
enum LogoutCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let server = ValueOption<Self>("server", "URL|NAME", .url, "the sign-in with this server")
        static let discovery = ValueOption<Self>("discovery", "URL", .url, "the sign-in with this provider")
        static let spec = CommandSpec(name: "logout", summary: "revoke and delete the stored sign-in", options: [server, discovery])

        var server: String?
        var discovery: String?

        init(_ values: OptionValues<Self>) {
            server = values[Self.server]
            discovery = values[Self.discovery]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let store = try context.deviceStore()
        let record = try store.signIn(server: options.server, discovery: options.discovery)
        let oauth = HTTPClientSettings(context, configuration: try context.configuration()).oauthClient(context)
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
