import DevtrustDevice
import DevtrustKeystore
import DevtrustTestSupport
import Testing

/// What `freshTokens` does with each outcome of a refresh: renewed tokens are
/// saved, only a refusal deletes the sign-in, a failure or an error keeps it.
@Suite struct SignInRefreshTests {
    struct Unreachable: Error, Equatable {}

    static let server = "https://idp.example"

    static func tokens(_ accessToken: String, expiresAt: Int64) -> TokenSet {
        TokenSet(accessToken: accessToken, tokenType: "Bearer", refreshToken: "r-\(accessToken)", idToken: nil, scope: "openid",
                 expiresAt: expiresAt, tokenEndpoint: "https://idp.example/oauth2/token", revocationEndpoint: nil)
    }

    /// A store with one sign-in whose access token expired long ago.
    static func expiredSignIn(in directory: TemporaryDirectory) throws -> (DeviceStore, SignInRecord) {
        let store = DeviceStore(keystore: Keystore(path: directory.file("ks")))
        let record = try store.saveSignIn(server: server, discovery: nil, clientId: "cli", scope: "openid", method: "app-native",
                                          tokens: tokens("old", expiresAt: 1_000))
        return (store, record)
    }

    @Test func renewedTokensAreSavedAndReturned() throws {
        let directory = TemporaryDirectory()
        let (store, record) = try Self.expiredSignIn(in: directory)
        var refreshed: [String] = []
        let fresh = try store.freshTokens(record, margin: 60) { current in
            refreshed.append(current.accessToken)
            return .renewed(Self.tokens("new", expiresAt: 4_102_444_800))
        }
        #expect(refreshed == ["old"])
        #expect(fresh.accessToken == "new")
        #expect(try store.tokens(of: record).accessToken == "new")
        // Now good for long enough: no second refresh.
        let again = try store.freshTokens(record, margin: 60) { _ in
            Issue.record("refreshed tokens that are still good")
            return .failed(reason: "unexpected", mayPass: false)
        }
        #expect(again.accessToken == "new")
    }

    @Test func aRefusalDeletesTheSignIn() throws {
        let directory = TemporaryDirectory()
        let (store, record) = try Self.expiredSignIn(in: directory)
        #expect(throws: DeviceError.refreshRefused("the grant is dead")) {
            try store.freshTokens(record, margin: 60) { _ in .refused(reason: "the grant is dead") }
        }
        #expect(try store.state().signIns.isEmpty)
        #expect(throws: KeystoreError.self) { try store.tokens(of: record) }
    }

    @Test(arguments: [true, false]) func aFailureKeepsTheSignInAndItsTokens(mayPass: Bool) throws {
        let directory = TemporaryDirectory()
        let (store, record) = try Self.expiredSignIn(in: directory)
        #expect(throws: DeviceError.refreshFailed(place: Self.server, reason: "HTTP 503", mayPass: mayPass)) {
            try store.freshTokens(record, margin: 60) { _ in .failed(reason: "HTTP 503", mayPass: mayPass) }
        }
        #expect(try store.state().signIns == [record])
        #expect(try store.tokens(of: record) == Self.tokens("old", expiresAt: 1_000))
    }

    @Test func anErrorOfTheRefreshPassesThroughAndKeepsTheSignIn() throws {
        let directory = TemporaryDirectory()
        let (store, record) = try Self.expiredSignIn(in: directory)
        #expect(throws: Unreachable()) {
            try store.freshTokens(record, margin: 60) { _ in throw Unreachable() }
        }
        #expect(try store.state().signIns == [record])
        #expect(try store.tokens(of: record).accessToken == "old")
    }
}
