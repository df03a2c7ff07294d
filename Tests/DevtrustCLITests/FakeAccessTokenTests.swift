import DevtrustEncoding
import DevtrustTestSupport
import Testing

/// `access-token` and `logout` in the fast tier, after `login --device-code` with
/// `FakeIdentityServer` on virtual time: the stored access token while it is valid, a refresh
/// (with the rotated refresh token the server knows) when it is about to expire or when asked,
/// and what a refused or failed refresh does to the sign-in. The same against the reference
/// server over HTTP: SignInTests, DeviceCodeTests (`make test`).
@Suite struct FakeAccessTokenTests {
    /// A device signed in with device code (approved at the first poll).
    static func signedIn(_ settings: FakeIdentityServer.Settings = .init()) throws -> FakeServerSetup {
        let setup = try FakeServerSetup(settings)
        let (login, _) = try setup.deviceCodeLogin()
        guard login.status == 0 else { throw FixtureError("login --device-code failed: \(login)") }
        return setup
    }

    static func tokenRequests(_ setup: FakeServerSetup) -> [FakeIdentityServer.Request] {
        setup.server.requests.filter { $0.path == "/oauth2/token" }
    }

    @Test func aValidAccessTokenIsPrintedWithoutAskingTheServer() throws {
        let setup = try Self.signedIn()
        let requests = setup.server.requests.count
        let first = try setup.run("access-token")
        #expect(first.status == 0 && setup.server.isValidAccessToken(first.output), "\(first)")
        setup.time.advance(by: 3000)
        #expect(try setup.run("access-token").output == first.output)
        #expect(setup.server.requests.count == requests && setup.server.refreshes == 0)
    }

    /// Within 60 s of its expiry, the access token is refreshed first: the refresh token goes to
    /// the token endpoint, and the new tokens are stored (the server's rotated refresh token works next time).
    @Test func anExpiringAccessTokenIsRefreshedFirst() throws {
        let setup = try Self.signedIn()
        let first = try setup.run("access-token").output
        setup.time.advance(by: 3600 - 30)
        let refreshed = try setup.run("access-token", "-v")
        #expect(refreshed.status == 0 && refreshed.output != first && setup.server.isValidAccessToken(refreshed.output), "\(refreshed)")
        #expect(refreshed.stderr.contains("refreshing the access token"), "\(refreshed.stderr)")
        let request = try #require(Self.tokenRequests(setup).last)
        #expect(request.form["grant_type"] == "refresh_token" && request.form["client_id"] == FakeIdentityServer.clientID, "\(request.form)")
        // Valid again for an hour; then refreshed with the refresh token the last answer gave.
        #expect(try setup.run("access-token").output == refreshed.output)
        setup.time.advance(by: 3600)
        let again = try setup.run("access-token")
        #expect(again.status == 0 && again.output != refreshed.output && setup.server.refreshes == 2, "\(again)")
    }

    @Test func refreshForcesARefreshWhateverTheExpirySays() throws {
        let setup = try Self.signedIn()
        let first = try setup.run("access-token").output
        let forced = try setup.run("access-token", "--refresh")
        #expect(forced.status == 0 && forced.output != first && setup.server.refreshes == 1, "\(forced)")
    }

    /// `--json`: what a script needs, never the refresh or ID token; the expiry in the (virtual) time of the answer.
    @Test func theJSONDocumentSaysWhenToAskAgain() throws {
        let setup = try Self.signedIn()
        let signedInAt = setup.time.secondsSinceEpoch()
        let result = try setup.run("access-token", "--json")
        let document = try #require(try JSONParser.parse(result.output).objectValue, "\(result)")
        #expect(document["tokenType"] == .string("Bearer") && document["scope"] == .string("openid") && document["expiryAssumed"] == .bool(false))
        #expect(document["expiresAt"] == .string(Timestamp.format(secondsSinceEpoch: signedInAt + 3600)), "\(document)")
        #expect(Set(document.keys) == ["accessToken", "tokenType", "expiresAt", "expiryAssumed", "scope"], "\(document.keys)")
    }

    /// The server refuses the refresh token (revoked, expired): the sign-in is over; exit 4, then 3.
    @Test func aRefusedRefreshDropsTheSignIn() throws {
        let setup = try Self.signedIn()
        setup.server.update { $0.refuseRefresh = true }
        let refused = try setup.run("access-token", "--refresh")
        #expect(refused.status == 4 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.contains("refused to refresh") && refused.stderr.contains("run `devtrust login` again"), "\(refused.stderr)")
        #expect(try setup.run("access-token").status == 3)
    }

    /// An outage is not a revocation: exit 5, the sign-in kept, and the next call (the server back) refreshes.
    @Test func aRefreshThatCannotReachTheServerKeepsTheSignIn() throws {
        let setup = try Self.signedIn()
        setup.server.goOffline()
        let failed = try setup.run("access-token", "--refresh")
        #expect(failed.status == 5 && failed.stdout.isEmpty, "\(failed)")
        #expect(failed.stderr.contains("cannot connect to \(setup.url)/oauth2/token") && failed.stderr.contains("it is kept"), "\(failed.stderr)")
        #expect(failed.stderr.contains("run the command again in a while"), "\(failed.stderr)")
        setup.server.goOffline(false)
        let retried = try setup.run("access-token", "--refresh")
        #expect(retried.status == 0 && setup.server.isValidAccessToken(retried.output), "\(retried)")
    }

    @Test func logoutRevokesTheTokensAndDeletesTheSignIn() throws {
        let setup = try Self.signedIn()
        let token = try setup.run("access-token").output
        let logout = try setup.run("logout")
        #expect(logout.status == 0 && logout.stderr.contains("revoked the refresh token and access token"), "\(logout)")
        #expect(!setup.server.isValidAccessToken(token))
        #expect(setup.server.requests.filter { $0.path == "/oauth2/revoke" }.count == 2)
        #expect(try setup.run("access-token").status == 3)
    }

    @Test func withoutASignInItExitsThree() throws {
        let setup = try FakeServerSetup()
        let result = try setup.run("access-token")
        #expect(result.status == 3 && result.stdout.isEmpty && setup.server.requests.isEmpty, "\(result)")
    }
}
