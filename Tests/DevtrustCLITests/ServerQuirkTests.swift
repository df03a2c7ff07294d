import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// What real servers send that devtrust's first reading did not expect.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct ServerQuirkTests {
    /// A message may carry only its i18nKey: the key is shown, and the flow goes on.
    @Test func aMessageWithOnlyAnI18nKeyIsShown() throws {
        let server = try ReferenceServer(["--fault", "i18n-only-message", "--fault-at", "1"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let registered = try cli.run(["register", "--server", server.url, "--non-interactive"] + RegisterTests.answers)
        #expect(registered.status == 0, "\(registered)")
        #expect(registered.stderr.contains("flow.message.code.sent"), "\(registered.stderr)")

        let signInServer = try ReferenceServer(["--fault", "i18n-only-message", "--fault-on", "signin", "--fault-at", "1"])
        let login = try cli.run(["login", "--server", signInServer.url, "--client-id", "devtrust-app", "--non-interactive"] + SignInTests.basicAnswers)
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("authentication.message.choose"), "\(login.stderr)")
    }

    /// `--authenticator` takes an id, a name, or a unique start of one; several candidates are listed, none is guessed.
    @Test func anAuthenticatorIsChosenOnlyWhenTheNameIsUnique() throws {
        let server = try ReferenceServer(["--authenticators", "lookalike"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        func login(_ authenticator: String, _ inputs: [String]) throws -> ProcessResult {
            try cli.run(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive", "--authenticator", authenticator] + inputs)
        }
        let otp = ["--input", "username=alice@example.com", "--input", "OTPCode=123456"]
        let ambiguous = try login("email", otp)
        #expect(ambiguous.status == 2, "\(ambiguous)")
        #expect(ambiguous.stderr.contains("--authenticator email is the start of several of the server's options: Email OTP (email-otp-authenticator, id ")
                && ambiguous.stderr.contains("Email Magic Link (MagicLinkAuthenticator, id "), "\(ambiguous.stderr)")
        let inside = try login("OTP", otp)
        #expect(inside.status == 2 && inside.stderr.contains("--authenticator OTP is not among the server's options"), "\(inside)")
        #expect(try login("email otp", otp).status == 0)
        #expect(try login("email-otp", otp).status == 0, "a unique start of the internal name")
        #expect(try login("Username", SignInTests.basicAnswers.filter { $0 != "--authenticator" && $0 != "BasicAuthenticator" }).status == 0)
    }
}

/// Commands use the shared pieces the same way: errors name the command that was run, and a
/// broken configuration file is an error for every command that reads it.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct SharedPiecesTests {
    @Test func loginsInputErrorsPointToLogin() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let bad = directory.write("bad.json", "[1, 2]")
        let result = try cli.run("login", "--server", "https://idp.example", "--client-id", "c", "--inputs", bad)
        #expect(result.status == 2 && result.stderr.contains("see `devtrust help login`") && !result.stderr.contains("help register"), "\(result)")
    }

    @Test(arguments: [["logout"], ["access-token"], ["login", "--callback", "http://127.0.0.1:8765/callback?code=c&state=s"]])
    func aBrokenConfigurationIsAnErrorForSignInCommands(_ arguments: [String]) throws {
        let setup = try SignInTests.Setup([], register: false)
        #expect(try setup.login().status == 0)
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("broken.json", #"{"http":{"requestTimeoutSeconds":"soon"}}"#)
        let result = try cli.run(arguments)
        #expect(result.status == 2 && result.stderr.contains("broken.json"), "\(arguments): \(result)")
    }
}
