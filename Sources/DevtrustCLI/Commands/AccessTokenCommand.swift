import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore
import DevtrustSignIn
import DevtrustSignInService

/// `access-token`: prints a valid access token of the stored sign-in,
/// refreshing it first when it expires within 60 s (or, with `--refresh`,
/// in any case: a resource's 401 says more than an expiry devtrust assumed).
enum AccessTokenCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let server = ValueOption<Self>("server", "URL|NAME", .url, "the sign-in with this server")
        static let discovery = ValueOption<Self>("discovery", "URL", .url, "the sign-in with this provider")
        static let refresh = FlagOption<Self>("refresh", "refresh first, whatever the expiry says (after a resource answered 401)")
        static let spec = CommandSpec(name: "access-token", summary: "print a valid access token of the stored sign-in (refreshing it first)",
                                      options: [server, discovery, refresh])

        var server: String?
        var discovery: String?
        var refresh: Bool

        init(_ values: OptionValues<Self>) {
            server = values[Self.server]
            discovery = values[Self.discovery]
            refresh = values[Self.refresh]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let store = try context.deviceStore()
        let record = try store.signIn(server: options.server, discovery: options.discovery)
        let oauth = HTTPClientSettings(context, configuration: try context.configuration()).oauthClient(context)
        let tokens = try SignInRefresh.freshTokens(record, in: store, oauth: oauth, forced: options.refresh, dpop: { jkt, tokenEndpoint in
            try context.dpopBinding(boundTo: jkt, tokenEndpoint: tokenEndpoint, store: store, command: Options.spec.name)
        }, refreshing: { context.detail("refreshing the access token") })
        if let note = tokens.idTokenNote { context.warn(note) }
        context.output(context.json ? JSONWriter.string(.object(document(tokens))) : tokens.accessToken)
    }

    /// `--json`: what a script needs to use the access token and to know when to ask again;
    /// never the refresh token or the ID token. `expiresAt` is null when no expiry is known;
    /// `expiryAssumed` says it is devtrust's guess (the server gave no `expires_in`).
    static func document(_ tokens: TokenSet) -> JSONObject {
        var document: JSONObject = [
            "accessToken": .string(tokens.accessToken),
            // What goes before the token in Authorization: "DPoP" for a bound token (which also needs a proof), as the server wrote it otherwise.
            "tokenType": .string(tokens.isDPoPBound ? "DPoP" : tokens.tokenType),
            "expiresAt": tokens.expiresAt.map { .string(Timestamp.format(secondsSinceEpoch: $0)) } ?? .null,
            "expiryAssumed": .bool(tokens.expiryAssumed),
            "scope": tokens.scope.map { .string($0) } ?? .null,
        ]
        // Only for a bound sign-in: a bearer sign-in's document stays as it was.
        if let jkt = tokens.dpopJkt { document["dpopJkt"] = .string(jkt) }
        return document
    }
}
