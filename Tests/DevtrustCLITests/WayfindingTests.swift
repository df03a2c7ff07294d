@testable import DevtrustCLI
import DevtrustEncoding
@testable import DevtrustSignInService
import DevtrustTestSupport
import Foundation
import Testing

/// Finding one's way (issue 15): help, suggestions, what a mistake says;
/// each through the binary, in a pseudo-terminal where the terminal matters.
@Suite struct WayfindingTests {
    func devtrust(_ directory: TemporaryDirectory) -> DevtrustBinary {
        DevtrustBinary(keystore: directory.file("ks"))
    }

    @Test func bareDevtrustPrintsTheHelp() throws {
        let cli = devtrust(TemporaryDirectory())
        let bare = try cli.run([])
        let help = try cli.run("--help")
        // The usage with the commands, on stderr (stdout carries only artifacts), and exit 2 (the CLI contract).
        #expect(bare.status == 2 && bare.stdout.isEmpty, "\(bare)")
        #expect(bare.stderr == help.stdout && bare.stderr.contains("Commands:\n  init "), "\(bare)")
        // Global options without a command are still a usage error.
        let optionsOnly = try cli.run("--json")
        #expect(optionsOnly.status == 2 && optionsOnly.stdout.isEmpty && optionsOnly.stderr.contains("no command given"), "\(optionsOnly)")
    }

    @Test(arguments: [
        (["regster"], "devtrust: error: unknown command \"regster\"; did you mean \"register\"?\n"),
        (["lo"], "devtrust: error: unknown command \"lo\"; did you mean \"login\" or \"logout\"?\n"),
        (["tokne"], "devtrust: error: unknown command \"tokne\"; did you mean \"token\"?\n"),
        (["frobnicate"], "devtrust: error: unknown command \"frobnicate\"; run `devtrust --help` for the list\n"),
        (["register", "--sever", "https://idp.example"],
         "devtrust: error: unknown option --sever; did you mean --server? (see `devtrust help register`)\n"),
        (["pubkey", "--formt=pem"], "devtrust: error: unknown option --formt; did you mean --format? (see `devtrust help pubkey`)\n"),
        (["token", "--verbos"], "devtrust: error: unknown option --verbos; did you mean --verbose? (see `devtrust help token`)\n"),
        (["--keystor", "x", "status"], "devtrust: error: unknown option --keystor; did you mean --keystore?\n"),
        (["sign-challenge", "--jsn"],
         "devtrust: error: unknown option --jsn; did you mean --json? (an argument that starts with \"-\" goes after `--`) (see `devtrust help sign-challenge`)\n"),
        (["pubkey", "--frob"], "devtrust: error: unknown option --frob (see `devtrust help pubkey`)\n"),
        (["help", "regsiter"], "devtrust: error: no command \"regsiter\"; did you mean \"register\"?\n"),
    ])
    func aMistypedNameGetsASuggestion(arguments: [String], stderr: String) throws {
        let result = try devtrust(TemporaryDirectory()).run(arguments)
        #expect(result.status == 2 && result.stdout.isEmpty && result.stderr == stderr, "\(arguments): \(result)")
    }

    @Test func suggestionsAreCloseNamesOnly() {
        #expect(NameSuggestions.editDistance(Array("tokne"), Array("token")) == 1)
        #expect(NameSuggestions.editDistance(Array("kitten"), Array("sitting")) == 3)
        #expect(NameSuggestions.closest(to: "reg", among: ["register", "reset"]) == ["register"])
        #expect(NameSuggestions.closest(to: "status", among: ["status"]).isEmpty)
        #expect(NameSuggestions.closest(to: "x", among: ["init"]).isEmpty)
        #expect(NameSuggestions.closest(to: "zzzz", among: CommandSpecs.commands.map(\.name)).isEmpty)
    }

    @Test func helpShowsRequiredOptionsWithoutBrackets() throws {
        let cli = devtrust(TemporaryDirectory())
        let register = try cli.run("help", "register")
        #expect(register.status == 0 && register.stdout.hasPrefix("Usage: devtrust register --server URL [--flow-type TYPE]"), "\(register)")
        let verify = try cli.run("help", "verify").stdout
        #expect(verify.hasPrefix("Usage: devtrust verify --public-key SPKI_B64|PEM_FILE\n    (--jwt TOKEN|- | --signature SIG --message FILE|-)\n"), "\(verify)")
        let login = try cli.run("help", "login").stdout
        #expect(login.hasPrefix("Usage: devtrust login\n    (--server URL | --discovery URL | --profile NAME | --callback URL)\n"), "\(login)")
        #expect(try cli.run("help", "token").stdout.hasPrefix("Usage: devtrust token [--server URL|NAME] [--device-id ID]"))
    }

    /// Every help text the binary prints fits an 80-column terminal.
    @Test func everyHelpLineFitsEightyColumns() throws {
        let cli = devtrust(TemporaryDirectory())
        var texts = [try cli.run([]).stderr, try cli.run("--help").stdout]
        for command in CommandSpecs.commands {
            let help = try cli.run("help", command.name)
            #expect(help.status == 0, "\(command.name): \(help)")
            texts.append(help.stdout)
            if command.name != HelpCommand.spec.name { #expect(try cli.run(command.name, "--help").stdout == help.stdout) }
        }
        for text in texts {
            #expect(!text.isEmpty)
            for line in text.split(separator: "\n") {
                #expect(line.count <= 80, "\(line.count) columns: \(line)")
            }
        }
    }

    @Test func decliningTheResetPromptDeletesNothingAndIsNoError() throws {
        let directory = TemporaryDirectory()
        let cli = devtrust(directory)
        try cli.run("init", "-q", "--backend", "software")
        let publicKey = try cli.run("pubkey").output
        for answer in ["n\n", "\n", "no\n"] {
            let session = try PseudoTerminal.run(cli, ["reset"], steps: [("\\[y/N\\] ", answer)])
            #expect(!session.timedOut && session.exit == 0, "\(session.transcript)")
            #expect(session.transcript.contains("reset cancelled: nothing deleted") && !session.transcript.contains("error"), "\(session.transcript)")
            #expect(try cli.run("pubkey").output == publicKey)
        }
        let accepted = try PseudoTerminal.run(cli, ["reset"], steps: [("\\[y/N\\] ", "y\n")])
        #expect(accepted.exit == 0 && accepted.transcript.contains("deleted the device key"), "\(accepted.transcript)")
        #expect(try cli.run("pubkey").status == 3)
    }
}

/// What register and token say with -v, and the hints for a server URL that is not the base.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct WayfindingServerTests {
    static let inputs = ["--input", "http://wso2.com/claims/emailaddress=dana@example.com", "--input", "password=pw-Verbose-4471", "--input", "otp=123456"]

    @Test func verboseSaysEachStepOnStderrAndStdoutStaysTheArtifact() throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q", "--backend", "software")
        let fingerprint = try cli.run("pubkey", "--format", "thumbprint").output
        let register = try cli.run(["-v", "register", "--server", server.url, "--non-interactive"] + Self.inputs)
        #expect(register.status == 0 && register.stdout.isEmpty, "\(register)")
        let execute = server.url + "/api/server/v1/flow/execute"
        for step in ["keystore: \(directory.file("ks"))\n", "key: software key \(fingerprint)\n", "claim platform: ", "claim keyProtection: ",
                     "http: POST \(execute)\nhttp: 200 from POST \(execute)\n",
                     "flow step 1: VIEW asking for http://wso2.com/claims/emailaddress, password; actions submit-registration\n",
                     "flow step 1: answering with action submit-registration and inputs http://wso2.com/claims/emailaddress, password\n",
                     "flow step 2: VIEW asking for otp", "flow step 3: INTERNAL_PROMPT (Device Registration)\n", "registered: this device is "] {
            #expect(register.stderr.contains(step), "register -v lacks \(step): \(register.stderr)")
        }
        #expect(!register.stderr.contains("pw-Verbose-4471") && !register.stderr.contains("123456"), "\(register.stderr)")
        let status = try cli.run("status", "--json")
        let registrationID = try #require(try JSONParser.parse(status.output).objectValue?["registrations"]?.arrayValue?.first?
            .objectValue?["registrationId"]?.stringValue)

        let plain = try cli.run("token")
        let verbose = try cli.run("-v", "token")
        #expect(plain.status == 0 && plain.stderr.isEmpty && verbose.status == 0, "\(verbose)")
        // The same artifact: one JWT line with the same header (jti and iat differ per call).
        #expect(verbose.stdout.split(separator: ".").count == 3 && verbose.stdout.hasSuffix("\n") && !verbose.output.contains("\n"))
        #expect(verbose.stdout.split(separator: ".")[0] == plain.stdout.split(separator: ".")[0])
        for step in ["keystore: \(directory.file("ks"))\n", "key: software key \(fingerprint)\n",
                     "registration: \(registrationID) at \(server.url), the only one\n", "claim platform: the configuration (linux)\n",
                     "claim osName: ", "signing: an ES256 device token"] {
            #expect(verbose.stderr.contains(step), "token -v lacks \(step): \(verbose.stderr)")
        }
        // No part of the token on stderr.
        for part in verbose.output.split(separator: ".") { #expect(!verbose.stderr.contains(part)) }
        let explicit = try cli.run("-v", "token", "--device-id", "dev-7")
        #expect(explicit.stderr.contains("device id: dev-7, from --device-id\n"), "\(explicit.stderr)")
    }

    @Test func anEndpointPastedAsTheServerGetsTheBaseURL() throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q", "--backend", "software")
        let pasted = server.url + "/t/acme/api/server/v1/flow/execute"
        let register = try cli.run(["register", "--server", pasted, "--non-interactive"] + Self.inputs)
        #expect(register.status == 2 && register.stdout.isEmpty, "\(register)")
        #expect(register.stderr == "devtrust: error: --server \(pasted) is an API endpoint, not the server's base URL: use --server \(server.url)/t/acme (see `devtrust help register`)\n")
        let login = try cli.run("login", "--server", server.url + "/oauth2/authorize", "--client-id", "devtrust-app", "--non-interactive")
        #expect(login.status == 2 && login.stderr.contains("is an API endpoint, not the server's base URL: use --server \(server.url) (see `devtrust help login`)"),
                "\(login)")
        // Nothing reached the server.
        #expect(try server.devices().isEmpty)
        // A base whose own path merely contains the words is a base.
        #expect(ServerBaseURL.base(of: "https://idp.example/t/oauth2-tenant") == nil)
        #expect(ServerBaseURL.base(of: "https://idp.example/api/server/v1") == "https://idp.example")
    }

    /// https:// to a port that speaks plain HTTP: the reference server is such a listener.
    @Test func httpsToAPlainHTTPPortSaysSo() throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q", "--backend", "software")
        let wrongScheme = "https://" + server.url.dropFirst("http://".count)
        let hostAndPort = String(wrongScheme.dropFirst("https://".count))
        let result = try cli.run(["register", "--server", wrongScheme, "--non-interactive"] + Self.inputs)
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("devtrust: error: the server at \(hostAndPort) answered plain HTTP to an HTTPS request: check the URL's scheme and port"),
                "\(result.stderr)")
        #expect(!result.stderr.contains("wrong version number") && !result.stderr.contains("error:0A"), "\(result.stderr)")
    }
}

/// A command run on a pseudo-terminal (Tests/Interop/pty_session.py), its prompts answered.
enum PseudoTerminal {
    struct Session {
        let exit: Int32
        let transcript: String
        let timedOut: Bool
    }

    static func run(_ cli: DevtrustBinary, _ arguments: [String], steps: [(expect: String, send: String)],
                    environment extra: [String: String] = [:]) throws -> Session {
        let script = JSONWriter.string(.array(steps.map { .object(["expect": .string($0.expect), "send": .string($0.send)]) }))
        var environment = cli.environment
        environment["TERM"] = "xterm"
        environment.merge(extra) { $1 }
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/pty_session.py"), script, "--", cli.path] + arguments,
                                           environment: environment)
        let report = try JSONParser.parse(result.stdout).objectValue!
        return Session(exit: Int32(report["exit"]!.int64Value!), transcript: report["transcript"]!.stringValue!,
                       timedOut: report["timedOut"] == .bool(true))
    }
}
