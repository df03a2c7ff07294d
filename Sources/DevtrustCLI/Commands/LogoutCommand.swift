import DevtrustDevice
import DevtrustSignIn
import DevtrustSignInService

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
        let revocation = SignInRevocation(record, tokens: try? store.tokens(of: record), oauth: oauth)
        try store.removeSignIn(record)
        let revoked = revocation.revoked
        context.success((revoked.isEmpty ? "" : "revoked the \(revoked.joined(separator: " and ")) and ") + "deleted the sign-in at \(revocation.place)")
        for failure in revocation.failures { context.warn(failure) }
    }
}
