@testable import DevtrustBrowser
@testable import DevtrustCLI
@testable import DevtrustDoctor
import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustFlow
import DevtrustHTTP
import DevtrustJOSE
@testable import DevtrustKeys
import DevtrustKeystore
import DevtrustSignIn
import DevtrustSystem
@testable import DevtrustTerminal
import Glibc
import Testing

/// Every error a command can end with, mapped to its message and the exit code
/// of ../shared/docs/cli-contract.md (ErrorReporting.swift is the one place
/// that does it); and how the command line prints the report.
@Suite struct ErrorReportTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let error: any Error
        let exitCode: Int32
        /// The message shown; nil when it is the error's own description.
        let message: String?
        var testDescription: String { name }

        init(_ name: String, _ error: any Error, _ exitCode: Int32, message: String? = nil) {
            self.name = name
            self.error = error
            self.exitCode = exitCode
            self.message = message
        }
    }

    struct SomethingElse: Error {}

    static let cases: [Case] = [
        Case("usage error of a command", UsageError("--format must be spki, pem, jwk or thumbprint", command: "pubkey"), 2,
             message: "--format must be spki, pem, jwk or thumbprint (see `devtrust help pubkey`)"),
        Case("usage error before any command", UsageError("no command given; run `devtrust --help` for the list"), 2,
             message: "no command given; run `devtrust --help` for the list"),
        Case("configuration file", ConfigError(file: "/etc/devtrust/config.json", problem: .notFound), 2),
        Case("keystore permissions", KeystoreError.unsafePermissions(path: "/ks", mode: 0o750, fix: "chmod 700 /ks"), 7),
        Case("keystore corrupt", KeystoreError.corrupt(path: "/ks/keystore.json", detail: "not valid JSON"), 7),
        Case("keystore locked", KeystoreError.locked(path: "/ks", waitedSeconds: 10), 7),
        Case("no device key", DeviceError.noDeviceKey(keystore: "/ks"), 3),
        Case("not registered", DeviceError.notRegistered(server: nil), 3),
        Case("registration for another key", DeviceError.registrationForOtherKey(registrationId: "r", server: "https://s"), 3),
        Case("not signed in", DeviceError.notSignedIn(server: "https://s"), 3),
        Case("ambiguous registration", DeviceError.ambiguousRegistration(servers: ["https://a", "https://b"]), 2),
        Case("ambiguous sign-in", DeviceError.ambiguousSignIn(names: ["https://a", "https://b"]), 2),
        Case("imported key of another backend", DeviceError.importedKeyBackend(requested: "tpm", found: "software"), 2),
        Case("key of another backend exists", DeviceError.keyExistsWithOtherBackend(existing: "software", requested: "tpm"), 1),
        Case("key changed during registration", DeviceError.keyChangedDuringRegistration, 1),
        Case("refresh refused", DeviceError.refreshRefused("invalid_grant"), 4),
        Case("refresh failed, may pass", DeviceError.refreshFailed(place: "https://s", reason: "503", mayPass: true), 5),
        Case("refresh failed, will not pass", DeviceError.refreshFailed(place: "https://s", reason: "invalid_client", mayPass: false), 4),
        Case("server URL not usable", HTTPError.invalidURL("ftp://s", reason: "not http or https"), 2),
        Case("plain http to another host", HTTPError.insecureURL("http://example.org"), 2),
        Case("transport failure", HTTPError.transport(url: "https://s", failure: .connect, detail: "refused"), 5),
        Case("redirected", HTTPError.redirected(url: "https://s", status: 302, location: "https://elsewhere"), 5),
        Case("libcurl too old", HTTPError.libraryTooOld(version: "7.61.1"), 5),
        Case("libcurl missing", HTTPError.libraryUnavailable("libcurl.so.4: cannot open"), 5),
        Case("answer too large", HTTPError.responseTooLarge(url: "https://s", limit: 1 << 20), 5),
        Case("flow refused", FlowServerError(httpStatus: 400, code: "FE-60008", message: "Invalid input", serverDescription: "otp"), 4),
        Case("flow step not supported", FlowUnsupportedError("a step devtrust cannot take"), 4),
        Case("flow protocol", FlowProtocolError("not JSON"), 5),
        Case("flow inputs missing", MissingFlowInputsError(inputs: [(name: "otp", label: "Verification code")], stepText: ["Verify"]), 2),
        Case("OAuth refusal", OAuthError(error: "invalid_client", errorDescription: nil, httpStatus: 401), 4),
        Case("OAuth protocol", OAuthProtocolError("no token_endpoint"), 5),
        Case("sign-in step not supported", SignInUnsupportedError("a federated authenticator"), 4),
        Case("device code expired", DeviceCodeFailure.expired, 4),
        Case("device code denied", DeviceCodeFailure.denied, 4),
        Case("interrupted", Interrupted(signal: SIGINT), 1),
        Case("request interrupted", HTTPError.interrupted(url: "https://s/token", signal: SIGTERM), 1),
        Case("listener interrupted", LoopbackListenerError.interrupted(signal: SIGHUP), 1),
        Case("loopback listener", LoopbackListenerError.cannotListen(address: "127.0.0.1:8400", code: EADDRINUSE), 5),
        Case("loopback timeout", LoopbackListenerError.timedOut(redirectURI: "http://127.0.0.1:8400/callback", seconds: 300), 5),
        Case("TPM unreachable", TPMError.unreachable(tcti: "device:/dev/tpmrm0", reason: "no such device", hint: nil), 6),
        Case("TPM software stack missing", TPMError.softwareStackMissing(reason: "libtss2-esys.so.0 not found"), 6),
        Case("TPM key self-test", KeySelfTestFailure(backend: .tpm), 6),
        Case("software key self-test", KeySelfTestFailure(backend: .software), 7),
        Case("key file", KeyFileError(message: "/k.pem: not a PKCS#8 P-256 private key: an RSA key", cause: .notP256), 2),
        Case("verify: invalid", CLIError.invalid("the token is 3 s old, older than --max-age 1 s"), 1,
             message: "invalid: the token is 3 s old, older than --max-age 1 s"),
        Case("a command's own failure", CLIError.failure("reset cancelled; nothing was deleted"), 1, message: "reset cancelled; nothing was deleted"),
        Case("verification failure", VerificationFailure.badSignature, 1, message: "invalid: the signature does not verify with this public key"),
        Case("OpenSSL", OpenSSLError(operation: "EVP_DigestSign", detail: "error:1C800066:Provider routines::cipher operation failed"), 1,
             message: "a cryptographic operation failed (EVP_DigestSign); this is a bug or a broken OpenSSL installation, please report it"),
        Case("file not written", FileWriteError(path: "/c/clock.json", operation: "rename", code: EACCES), 1),
        Case("program not run", SubprocessError.timedOut("/usr/sbin/nft", milliseconds: 2000), 1),
        Case("ID token rejected", IDTokenRejection("the ID token's nonce is not this sign-in's"), 1),
        Case("public key", PublicKeyError(message: "not a point on P-256"), 1),
        Case("JSON", JSONParseError(message: "unexpected end", offset: 3), 1),
        Case("DER", DERError("a length in non-minimal form"), 1),
        Case("anything else", SomethingElse(), 1, message: "unexpected error: SomethingElse()"),
    ]

    @Test(arguments: cases)
    func eachErrorHasItsMessageAndExitCode(_ errorCase: Case) {
        let report = ErrorReport.from(errorCase.error)
        #expect(report.exitCode.rawValue == errorCase.exitCode, "\(errorCase.name): exit \(report.exitCode.rawValue)")
        #expect(report.message == errorCase.message ?? "\(errorCase.error)", "\(errorCase.name): \(report.message)")
        #expect(!report.message.isEmpty)
    }

    /// A signal that ends a wait is one category wherever it ends it (polling, a request under way,
    /// the browser's listener): each front end ends by the signal, and the event stream says `interrupted`.
    @Test func everyInterruptionIsOneCategoryCarryingItsSignal() {
        let interruptions: [(any Error, Int32)] = [(Interrupted(signal: SIGINT), SIGINT),
                                                   (HTTPError.interrupted(url: "https://s/token", signal: SIGTERM), SIGTERM),
                                                   (LoopbackListenerError.interrupted(signal: SIGHUP), SIGHUP)]
        for (error, signal) in interruptions {
            #expect(ErrorClassification(of: error).category == .interrupted(signal: signal), "\(error)")
        }
    }

    /// A server that does not speak its protocol is one category, whichever protocol it breaks.
    @Test func aServerBreakingAnyProtocolIsOneCategory() {
        for error: any Error in [FlowProtocolError("not JSON"), OAuthProtocolError("no token_endpoint")] {
            #expect(ErrorClassification(of: error).category == .protocolViolation, "\(error)")
        }
        #expect(ErrorClassification(of: HTTPError.transport(url: "https://s", failure: .connect, detail: "refused")).category == .network)
    }

    /// Only OpenSSL's own error queue is a detail (shown with --verbose); it never replaces the message.
    @Test func onlyOpenSSLErrorsCarryADetail() {
        let openSSL = ErrorReport.from(OpenSSLError(operation: "EVP_PKEY_derive", detail: "error:03000096:digital envelope routines::operation not supported"))
        #expect(openSSL.detail == "error:03000096:digital envelope routines::operation not supported")
        #expect(!openSSL.message.contains("error:03000096"))
        for errorCase in Self.cases where !(errorCase.error is OpenSSLError) {
            #expect(ErrorReport.from(errorCase.error).detail == nil, "\(errorCase.name)")
        }
    }

    /// Every code of the contract's table is some error's.
    @Test func everyExitCodeIsUsed() {
        #expect(Set(Self.cases.map(\.exitCode)) == Set(ExitCode.allCases.map(\.rawValue)).subtracting([ExitCode.success.rawValue]))
    }

    /// The native host's code comes from the error's category, as its exit code does: the categories
    /// the extension tells apart have their own, all others are `failed`.
    @Test func theNativeHostsCodeFollowsTheCategory() {
        let ownCodes = ["configuration file": "config", "no device key": "no_key", "not registered": "not_registered", "not signed in": "not_registered",
                        "registration for another key": "not_registered", "keystore permissions": "keystore", "keystore corrupt": "keystore",
                        "keystore locked": "keystore", "software key self-test": "keystore", "TPM unreachable": "tpm",
                        "TPM software stack missing": "tpm", "TPM key self-test": "tpm"]
        for errorCase in Self.cases {
            let refusal = NativeHost.refusal(errorCase.error)
            #expect(refusal.code.rawValue == ownCodes[errorCase.name] ?? "failed", "\(errorCase.name): \(refusal.code)")
            #expect(refusal.message == ErrorReport.from(errorCase.error).message, "\(errorCase.name)")
        }
    }

    /// What a child process reports (`ForwardedError`) reaches its parent classified as the error
    /// itself was, whatever its category.
    @Test func aForwardedErrorIsClassifiedAsTheErrorWas() throws {
        let everyCategory = ErrorCategory.withoutValues + [.oauthError(code: "invalid_grant", description: "gone"), .oauthError(code: "x", description: nil),
                                                           .interrupted(signal: SIGTERM)]
        let classifications = Self.cases.map { ErrorClassification(of: $0.error) }
            + everyCategory.map { ErrorClassification($0, summary: "what\nfailed", hint: ErrorHint("what to do", joinedBy: " (", closing: ")"), detail: "d", quotesServer: true) }
        for classification in classifications {
            let forwarded = try #require(ForwardedError(json: ForwardedError(classification).json), "\(classification)")
            #expect(forwarded.classification == classification)
            #expect(ErrorReport.from(forwarded) == ErrorReport(classification))
        }
    }
}
