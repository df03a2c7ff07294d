import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// ID tokens are kept only when they check out (OpenID Connect Core 3.1.3.7),
/// against tokens a provider written in Python signs (python3-cryptography).
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct IDTokenTests {
    static func signIn(_ serverArguments: [String]) throws -> (setup: SignInTests.Setup, login: ProcessResult, signIn: JSONObject) {
        let setup = try SignInTests.Setup(serverArguments, register: false)
        let login = try setup.login()
        let status = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue ?? [:]
        return (setup, login, status["signIns"]?.arrayValue?.first?.objectValue ?? [:])
    }

    static func storedIDToken(_ setup: SignInTests.Setup) throws -> String? {
        let file = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        return try JSONParser.parse(try #require(setup.directory.read("ks/" + file))).objectValue?["idToken"]?.stringValue
    }

    @Test(arguments: ["ES256", "RS256"])
    func aValidIDTokenIsKeptAndNamesWhoSignedIn(alg: String) throws {
        let (setup, login, signIn) = try Self.signIn(["--id-token-alg", alg])
        #expect(login.status == 0 && login.stderr.contains("signed in at \(setup.server.url) as client devtrust-app, user Alice Example (sub user-"), "\(login)")
        #expect(!login.stderr.contains("keeps no ID token"))
        #expect(signIn["name"] == .string("Alice Example") && signIn["subject"]?.stringValue?.hasPrefix("user-") == true, "\(signIn)")
        #expect(try Self.storedIDToken(setup) != nil)
        #expect(try setup.cli.run("status").output.contains(": client devtrust-app, user Alice Example (sub user-"))
        // A refresh brings a new one, checked the same way (no nonce there).
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_CONFIG"] = nil
        #expect(try cli.run("access-token", "--refresh").status == 0)
        #expect(try Self.storedIDToken(setup) != nil)
    }

    /// Each way an ID token can be wrong: the sign-in goes on, without it, and says why.
    @Test(arguments: [
        ("wrong-iss", "its issuer is http://127.0.0.1:"), ("wrong-aud", "its audience does not include the client devtrust-app"),
        ("multi-aud-no-azp", "it has several audiences and no azp"), ("expired", "it expired 120 s ago"),
        ("future-iat", "it was issued "), ("wrong-nonce", "its nonce is not the one sent"),
        ("no-nonce", "its nonce is not the one sent"), ("unknown-kid", "the provider's JWK set has no ES256 key with kid retired-key"),
        ("alg-none", "it is signed with none, not ES256 or RS256"), ("hs256", "it is signed with HS256, not ES256 or RS256"),
        ("bad-signature", "its signature does not verify with the provider's keys"),
        ("small-rsa-key", "the provider's JWK set has no RS256 key with kid rsa-1"), ("jwks-404", "its JWK set http://127.0.0.1:"),
    ])
    func aWrongIDTokenIsNotKept(fault: String, reason: String) throws {
        let (setup, login, signIn) = try Self.signIn(["--id-token-fault", fault])
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("devtrust keeps no ID token from \(setup.server.url)/oauth2/token: \(reason)"), "\(fault): \(login.stderr)")
        if fault == "future-iat" {
            // Issued 600 s ahead by the server's clock, checked a moment later by this one's (a loaded machine: a second or more).
            #expect(login.stderr.contains(#/it was issued (5[89]\d|600) s in the future/#), "\(login.stderr)")
        }
        #expect(try Self.storedIDToken(setup) == nil, "\(fault): stored")
        #expect(signIn["subject"] == .null && signIn["name"] == .null)
    }

    /// OpenID Connect Core 12.2: a refresh's ID token names the same user; one for another is not kept.
    @Test func aRefreshsIDTokenForAnotherUserIsNotKept() throws {
        let (setup, login, _) = try Self.signIn(["--id-token-fault", "other-sub-on-refresh"])
        #expect(login.status == 0 && !login.stderr.contains("keeps no ID token"), "\(login)")
        let before = try Self.storedIDToken(setup)
        let refreshed = try setup.cli.run("access-token", "--refresh")
        #expect(refreshed.status == 0 && refreshed.stderr.contains("keeps no ID token from \(setup.server.url)/oauth2/token: its sub user-mallory is not the signed-in user's"), "\(refreshed)")
        #expect(try Self.storedIDToken(setup) == before, "the other user's ID token was kept")
        let status = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue?["signIns"]?.arrayValue?.first?.objectValue
        #expect(status?["subject"]?.stringValue?.hasPrefix("user-") == true && status?["subject"] != .string("user-mallory"))
    }

    /// An ID token an earlier devtrust kept unchecked (its file records no issuer) names nobody.
    @Test func anIdentityIsShownOnlyFromACheckedIDToken() throws {
        let (setup, _, signIn) = try Self.signIn([])
        #expect(signIn["name"] == .string("Alice Example"))
        let file = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        var stored = try JSONParser.parse(try #require(setup.directory.read("ks/" + file))).objectValue!
        stored["issuer"] = nil
        stored["jwksUri"] = nil
        setup.directory.write("ks/" + file, JSONWriter.bytes(.object(stored)))
        let status = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue?["signIns"]?.arrayValue?.first?.objectValue
        #expect(status?["subject"] == .null && status?["name"] == .null, "\(String(describing: status))")
    }

    /// Discovery 4.1: an issuer may end in a slash.
    @Test func anIssuerEndingInASlashIsItsDocumentsIssuer() throws {
        let setup = try SignInTests.Setup(["--issuer", "/", "--device-interval", "1", "--device-approve-after", "1"], register: false)
        let login = try setup.cli.run(["login", "--device-code", "--discovery", setup.server.url + "/.well-known/openid-configuration",
                                       "--client-id", "devtrust-app", "--json"])
        #expect(login.status == 0 && !login.stderr.contains("keeps no ID token"), "\(login)")
    }

    @Test func severalAudiencesWithTheClientAsAzpAreAccepted() throws {
        let (setup, login, _) = try Self.signIn(["--id-token-fault", "multi-aud-azp"])
        #expect(login.status == 0 && !login.stderr.contains("keeps no ID token"), "\(login)")
        #expect(try Self.storedIDToken(setup) != nil)
    }

    /// OpenID Connect Discovery 4.3: a document whose issuer is not the URL it came from is refused.
    @Test func aDiscoveryDocumentForAnotherIssuerIsRefused() throws {
        let setup = try SignInTests.Setup([], register: false)
        let result = try setup.cli.run(["login", "--device-code", "--discovery", setup.server.url + "/.well-known/openid-configuration",
                                        "--client-id", "devtrust-app", "--json"])
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("names the issuer \(setup.server.url)/oauth2/token, but an issuer's document is at {issuer}/.well-known/openid-configuration"),
                "\(result.stderr)")
    }

    /// A real provider's ID token (glewlwyd, device code: no nonce): checked against its
    /// discovery issuer and JWK set, kept, and who signed in is shown.
    @Test(.enabled(if: GlewlwydPeer.shouldRun)) func glewlwydsIDTokenIsCheckedAndKept() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let (status, _, stderr) = try peer.signInWithDeviceCode(cli)
        #expect(status == 0 && !stderr.contains("keeps no ID token"), "\(stderr)")
        let signIn = try JSONParser.parse(try cli.run("status", "--json").output).objectValue?["signIns"]?.arrayValue?.first?.objectValue
        #expect(signIn?["subject"]?.stringValue?.isEmpty == false, "\(String(describing: signIn))")
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        #expect(try JSONParser.parse(try #require(directory.read("ks/" + file))).objectValue?["idToken"]?.stringValue != nil)
        // glewlwyd advertises no revocation endpoint, and this sign-in's profile does not say it has delete_token.
        let logout = try cli.run("logout")
        #expect(logout.status == 0 && !logout.stderr.contains("revoked the"), "\(logout)")
        #expect(logout.stderr.contains("the refresh token was not revoked: the server offers no revocation endpoint; it stays valid there until it expires"), "\(logout.stderr)")
    }
}
