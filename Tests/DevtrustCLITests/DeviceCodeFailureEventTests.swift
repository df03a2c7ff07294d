@testable import DevtrustCLI
import DevtrustEncoding
import DevtrustErrors
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignIn
@testable import DevtrustSignInService
@testable import DevtrustTerminal
import Testing

/// The final `failure` event of `login --device-code --json` for every kind of
/// error (the ones the reference server cannot cause are made here): an `error`
/// code and the same description the user reads on stderr.
@Suite struct DeviceCodeFailureEventTests {
    @Test func everyKindOfErrorGivesAFailureEventWithAnErrorAndADescription() {
        let cases: [(any Error, String)] = [
            (UsageError("a bad value", command: "login"), "usage_error"),
            (TPMError.unreachable(tcti: "device:/dev/tpmrm0", reason: "no such device", hint: nil), "tpm_error"),
            (KeystoreError.corrupt(path: "/ks/keystore.json", detail: "not JSON"), "keystore_error"),
            (HTTPError.transport(url: "https://idp/token", failure: .connect, detail: "refused"), "network_error"),
            (HTTPError.responseTooLarge(url: "https://idp/token", limit: 1), "network_error"),
            (OAuthProtocolError("no access_token"), "protocol_error"),
            (SignInUnsupportedError("the server advertises no device authorization endpoint"), "unsupported"),
            (OAuthError(error: "invalid_client", errorDescription: nil, httpStatus: 401), "invalid_client"),
            (DeviceCodeFailure.expired, "expired_token"),
            (DeviceCodeFailure.denied, "access_denied"),
        ]
        for (error, code) in cases {
            let event = PollingSignIn.failureEvent(error)
            #expect(event["event"] == .string("failure") && event["error"] == .string(code), "\(error): \(event)")
            #expect(event["description"] == .string(ErrorReport.from(error).message), "\(error): \(event)")
        }
        // The server's own description, when it gave one.
        let described = PollingSignIn.failureEvent(OAuthError(error: "invalid_client", errorDescription: "unknown client", httpStatus: 401))
        #expect(described["description"] == .string("unknown client"))
    }

    @Test func onlyAUsableIssuerIsRecorded() {
        #expect(SignInTarget.recordableIssuer("https://idp.example/t/acme") == "https://idp.example/t/acme")
        #expect(SignInTarget.recordableIssuer("http://127.0.0.1:4593/api/oidc") == "http://127.0.0.1:4593/api/oidc")
        for bad in [nil, "", "http://idp.example", "https://idp.example/?tenant=a", "https://idp.example/\u{1B}[2J", "https://idp .example", "acme"] as [String?] {
            #expect(SignInTarget.recordableIssuer(bad) == nil, "\(String(describing: bad))")
        }
    }
}
