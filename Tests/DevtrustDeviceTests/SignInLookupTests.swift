import DevtrustDevice
import DevtrustKeystore
import DevtrustTestSupport
import Testing

/// Which stored sign-in `--server` and `--discovery` name: a sign-in made with
/// a discovery URL is stored under its issuer and found by either, and records
/// of earlier versions (no issuer) are still found and replaced.
@Suite struct SignInLookupTests {
    static let discovery = "http://127.0.0.1:18084/oauth2/token/.well-known/openid-configuration"
    static let issuer = "http://127.0.0.1:18084/oauth2/token"

    static func tokens(_ accessToken: String) -> TokenSet {
        TokenSet(accessToken: accessToken, tokenType: "Bearer", refreshToken: "r", idToken: nil, scope: "openid", expiresAt: 4_102_444_800,
                 tokenEndpoint: "http://127.0.0.1:18084/oauth2/token", revocationEndpoint: nil)
    }

    @Test func aDiscoverySignInIsFoundByItsIssuerAndItsDiscoveryURL() throws {
        let directory = TemporaryDirectory()
        let store = DeviceStore(keystore: Keystore(path: directory.file("ks")))
        let saved = try store.saveSignIn(server: "https://idp.example/realms/acme", discovery: "https://idp.example/realms/acme/.well-known/openid-configuration",
                                         clientId: "cli", scope: "openid", method: "device-code", tokens: Self.tokens("a"))
        for name in ["https://idp.example/realms/acme", "https://IDP.example:443/realms/acme/", "idp.example/realms/acme", "idp.example",
                     "https://idp.example/realms/acme/.well-known/openid-configuration"] {
            #expect(try store.signIn(server: name, discovery: nil) == saved, "--server \(name)")
        }
        for name in ["https://idp.example/realms/acme/.well-known/openid-configuration", "https://idp.example/realms/acme"] {
            #expect(try store.signIn(server: nil, discovery: name) == saved, "--discovery \(name)")
        }
        #expect(try store.signIn(server: nil, discovery: nil) == saved)
        #expect(throws: DeviceError.notSignedIn(server: "https://idp.example/realms/other")) {
            try store.signIn(server: "https://idp.example/realms/other", discovery: nil)
        }
    }

    @Test func aRecordOfAnEarlierVersionIsFoundByTheIssuerItsURLImpliesAndReplacedByTheNextSignIn() throws {
        // Written by devtrust 1e02146 (`login --device-code --discovery`): a discovery URL and no issuer.
        let directory = TemporaryDirectory()
        let store = DeviceStore(keystore: Keystore(path: copyKeystoreFixture("v2/device-code-by-discovery", into: directory)))
        let old = try #require(try store.state().signIns.first)
        #expect(old.server == nil && old.discovery == Self.discovery)
        #expect(try store.signIn(server: nil, discovery: Self.discovery) == old)
        #expect(try store.signIn(server: Self.issuer, discovery: nil) == old)
        #expect(try store.signIn(server: "127.0.0.1:18084", discovery: nil) == old)
        #expect(try store.tokens(of: old).accessToken == "ROuR-QruZP_kjH0lotJBXg-rXtuxHvyoY2Qbf1nfVCs")
        // Signing in again with the same discovery URL replaces it (same id, same token file), now with the issuer.
        let new = try store.saveSignIn(server: Self.issuer, discovery: Self.discovery, clientId: old.clientId, scope: "openid", method: "device-code",
                                       tokens: Self.tokens("fresh"))
        #expect(new.id == old.id && new.file == old.file)
        #expect(try store.state().signIns == [new])
        #expect(try store.tokens(of: try store.signIn(server: nil, discovery: nil)).accessToken == "fresh")
    }

    @Test func serverPrefersAServerSignInAndDiscoveryADiscoverySignInOfTheSameIssuer() throws {
        let directory = TemporaryDirectory()
        let store = DeviceStore(keystore: Keystore(path: directory.file("ks")))
        let byServer = try store.saveSignIn(server: "https://idp.example", discovery: nil, clientId: "cli", scope: "openid", method: "app-native",
                                            tokens: Self.tokens("s"))
        let byDiscovery = try store.saveSignIn(server: "https://idp.example", discovery: "https://idp.example/.well-known/openid-configuration",
                                               clientId: "cli", scope: "openid", method: "device-code", tokens: Self.tokens("d"))
        #expect(byServer.id != byDiscovery.id)
        #expect(try store.signIn(server: "https://idp.example", discovery: nil) == byServer)
        #expect(try store.signIn(server: nil, discovery: "https://idp.example/.well-known/openid-configuration") == byDiscovery)
        #expect(try store.signIn(server: "https://idp.example/.well-known/openid-configuration", discovery: nil) == byDiscovery)
        #expect(throws: DeviceError.ambiguousSignIn(names: ["https://idp.example (client cli)", "https://idp.example/.well-known/openid-configuration (client cli)"])) {
            try store.signIn(server: nil, discovery: nil)
        }
    }

    @Test func theIssuerADiscoveryURLImplies() {
        let cases: [(String, String?)] = [
            ("https://idp.example/.well-known/openid-configuration", "https://idp.example"),
            ("https://idp.example/t/acme/oauth2/token/.well-known/openid-configuration", "https://idp.example/t/acme/oauth2/token"),
            ("http://127.0.0.1:4593/api/oidc/.well-known/openid-configuration", "http://127.0.0.1:4593/api/oidc"),
            ("https://idp.example/.well-known/oauth-authorization-server/t/acme", "https://idp.example/t/acme"),
            ("https://idp.example/.well-known/openid-configuration/t/acme", "https://idp.example/t/acme"),
            ("https://idp.example/t/acme/.well-known/oauth-authorization-server", "https://idp.example/t/acme"),
            ("https://idp.example/discovery.json", nil),
            ("https://idp.example/.well-known/openid-configuration?tenant=acme", nil),
            ("not a url/.well-known/openid-configuration", nil),
        ]
        for (url, issuer) in cases {
            #expect(DiscoveryURL.issuer(of: url) == issuer, "\(url)")
        }
    }
}
