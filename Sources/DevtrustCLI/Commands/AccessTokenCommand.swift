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

    static let refreshMargin: Int64 = 60

    static func run(_ context: CommandContext, _ options: Options) throws {
        let store = try context.deviceStore()
        let record = try store.signIn(server: options.server, discovery: options.discovery)
        let oauth = HTTPClientSettings(context, configuration: try context.configuration()).oauthClient(context)
        // A refresh may wait for another caller's: give the lock longer than one HTTP request.
        var keystore = store.keystore
        keystore.lockTimeoutMilliseconds = 60_000
        let forced = options.refresh
        if forced, try store.tokens(of: record).refreshToken == nil {
            throw DeviceError.refreshFailed(place: record.server ?? record.discovery ?? "the server", reason: "the server gave no refresh token", mayPass: false)
        }
        let margin = forced ? Int64.max / 2 : refreshMargin
        let tokens = try DeviceStore(keystore: keystore, clock: store.clock, tpm: store.tpm, random: store.random).freshTokens(record, margin: margin) { current in
            context.detail("refreshing the access token")
            var client = oauth
            // A DPoP-bound refresh token is refreshed only with a proof of its key (RFC 9449 section 5).
            if let jkt = current.dpopJkt {
                client.dpop = try context.dpopKey.binding(store: store, boundTo: jkt, tokenEndpoint: current.tokenEndpoint,
                                                          deadline: .command(context, doing: "signing a DPoP proof"))
            }
            return try RefreshOutcome.of { try client.refresh(current, clientID: record.clientId) }
        }
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
