@testable import DevtrustCLI
import DevtrustEncoding
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
        #expect(bare.status == 0 && bare.stderr.isEmpty, "\(bare)")
        #expect(bare.stdout == help.stdout && bare.stdout.contains("Commands:\n  init "), "\(bare)")
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
        var texts = [try cli.run([]).stdout, try cli.run("--help").stdout]
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
