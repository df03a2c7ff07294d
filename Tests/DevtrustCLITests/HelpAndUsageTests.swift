import DevtrustTestSupport
import Foundation
import Testing

/// Help and usage errors, in-process: what `--help` and `help COMMAND` print,
/// and that a usage error names the help that explains it.
@Suite struct HelpAndUsageTests {
    /// The commands of ../shared/docs/cli-contract.md.
    static let contractCommands = ["init", "pubkey", "sign-challenge", "device-data", "token", "register", "status", "attributes",
                                   "verify", "reset", "login", "access-token", "authorize-url", "logout"]

    /// The overview's command list: (name, summary) of each `  NAME  SUMMARY` line under "Commands:".
    /// The commands of the overview, each summary joined from its wrapped lines.
    static func listedCommands(_ overview: String) -> [(name: String, summary: String)] {
        let lines = overview.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "Commands:") else { return [] }
        var listed = [(name: String, summary: String)]()
        for line in lines[(start + 1)...].prefix(while: { $0.hasPrefix("  ") }) {
            let words = line.drop { $0 == " " }
            if line.hasPrefix("   "), let last = listed.popLast() {
                // A continuation line of the summary above (indented under the summaries).
                listed.append((last.name, last.summary + " " + words))
                continue
            }
            let name = words.prefix { $0 != " " }
            listed.append((String(name), String(words.dropFirst(name.count).drop { $0 == " " })))
        }
        return listed
    }

    /// A help text's paragraphs (separated by blank lines), each with its wrapped lines joined.
    static func paragraphs(_ text: String) -> [String] {
        text.split(separator: "\n\n").map { paragraph in
            paragraph.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        }
    }

    @Test func theOverviewListsEveryCommandAndIsTheSameHoweverAskedFor() {
        let overview = InProcessCLI.run(["--help"])
        #expect(overview.exitCode == 0 && overview.stderr.isEmpty)
        #expect(overview.stdout.hasPrefix("devtrust ") && overview.stdout.contains("Usage: devtrust [OPTIONS] COMMAND [ARGS]"))
        #expect(overview.stdout.hasSuffix("\n") && !overview.stdout.hasSuffix("\n\n"))
        let listed = Self.listedCommands(overview.stdout).map(\.name)
        #expect(Set(Self.contractCommands).isSubset(of: Set(listed)), "\(listed)")
        for global in ["--keystore DIR", "--config FILE", "--tcti CONF", "--ca-file FILE", "--json", "--verbose", "--quiet", "--help", "--version"] {
            #expect(overview.stdout.contains(global), "the overview does not show \(global)")
        }
        for arguments in [["-h"], ["help"], ["--help", "--json"], ["-q", "--help"]] {
            let again = InProcessCLI.run(arguments)
            #expect(again.exitCode == 0 && again.stdout == overview.stdout && again.stderr.isEmpty, "\(arguments)")
        }
    }

    /// `help COMMAND`, `COMMAND --help` and `COMMAND -h` print the same text: the usage line
    /// with every option the command takes, its summary as the overview gives it, the options.
    @Test(arguments: contractCommands)
    func everyCommandHasHelp(command: String) throws {
        let help = InProcessCLI.run(["help", command])
        #expect(help.exitCode == 0 && help.stderr.isEmpty, "\(help)")
        let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let paragraphs = Self.paragraphs(help.stdout)
        let usage = try #require(paragraphs.first)
        #expect(usage == "Usage: devtrust \(command)" || usage.hasPrefix("Usage: devtrust \(command) "), "\(usage)")
        let summary = try #require(Self.listedCommands(InProcessCLI.run(["--help"]).stdout).first { $0.name == command }?.summary)
        #expect(paragraphs.dropFirst().first == summary, "\(help.stdout)")
        // Every option of the usage (however wrapped, optional or required) is described below it.
        let options = usage.split(whereSeparator: { "[(| ".contains($0) }).compactMap { $0.hasPrefix("--") ? $0.prefix { $0 != "]" && $0 != ")" } : nil }
        if !options.isEmpty { #expect(lines.contains("Options:"), "\(help.stdout)") }
        for option in options {
            #expect(lines.dropFirst().contains { $0.hasPrefix("  ") && $0.contains(option) }, "\(command): \(option) is not described")
        }
        for arguments in [[command, "--help"], [command, "-h"], ["--help", command]] {
            let again = InProcessCLI.run(arguments)
            #expect(again.exitCode == 0 && again.stdout == help.stdout && again.stderr.isEmpty, "\(arguments)")
        }
    }

    @Test func helpForACommandThatDoesNotExist() {
        let result = InProcessCLI.run(["help", "frobnicate"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(result.stderr == "devtrust: error: no command \"frobnicate\"; run `devtrust --help`\n", "\(result.stderr)")
    }

    @Test func theVersion() {
        let result = InProcessCLI.run(["--version"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        let version = result.stdout.dropFirst("devtrust ".count).dropLast()
        #expect(result.stdout.hasPrefix("devtrust ") && result.stdout.hasSuffix("\n"), "\(result.stdout)")
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { UInt($0) != nil }, "\(result.stdout)")
        #expect(InProcessCLI.run(["token", "--version"]).stdout == result.stdout)
    }

    /// Bare `devtrust` shows the usage on stderr (exit 2); options without a command are a usage error.
    @Test func noCommandIsAUsageError() {
        let bare = InProcessCLI.run([])
        #expect(bare.exitCode == 2 && bare.stdout.isEmpty)
        #expect(bare.stderr == InProcessCLI.run(["--help"]).stdout, "\(bare.stderr)")
        let result = InProcessCLI.run(["--quiet"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(result.stderr == "devtrust: error: no command given; run `devtrust --help` for the list\n", "\(result.stderr)")
    }

    /// A usage error in a command's options points to that command's help, and nothing else is printed.
    @Test(arguments: contractCommands)
    func aUsageErrorPointsToTheCommandsHelp(command: String) {
        let hint = " (see `devtrust help \(command)`)\n"
        let unknown = InProcessCLI.run([command, "--no-such-option"])
        #expect(unknown.exitCode == 2 && unknown.stdout.isEmpty, "\(unknown)")
        #expect(unknown.stderr.hasPrefix("devtrust: error: unknown option --no-such-option") && unknown.stderr.hasSuffix(hint), "\(unknown.stderr)")
        #expect(unknown.stderr.split(separator: "\n").count == 1)
        // A global option's missing value, after the command.
        let missing = InProcessCLI.run([command, "--keystore"])
        #expect(missing.exitCode == 2 && missing.stderr == "devtrust: error: option --keystore needs a value (DIR)" + hint, "\(missing.stderr)")
        // A flag given a value.
        let flagValue = InProcessCLI.run([command, "--json=yes"])
        #expect(flagValue.exitCode == 2 && flagValue.stderr == "devtrust: error: option --json takes no value" + hint, "\(flagValue.stderr)")
    }

    /// Before any command there is no command's help to point to: the error says where the list is.
    @Test func aUsageErrorBeforeTheCommand() {
        let unknown = InProcessCLI.run(["--no-such-option", "token"])
        #expect(unknown.exitCode == 2 && unknown.stderr == "devtrust: error: unknown option --no-such-option\n", "\(unknown.stderr)")
        let command = InProcessCLI.run(["frobnicate"])
        #expect(command.exitCode == 2 && command.stderr == "devtrust: error: unknown command \"frobnicate\"; run `devtrust --help` for the list\n", "\(command.stderr)")
    }

    /// What the user typed is shown, not obeyed: terminal controls in an argument are escaped in the error.
    @Test func controlCharactersInAnArgumentAreEscapedInTheError() {
        let result = InProcessCLI.run(["\u{1B}]0;owned\u{07}\u{1B}[2J"])
        #expect(result.exitCode == 2)
        #expect(result.stderr == "devtrust: error: unknown command \"\\u{1B}]0;owned\\u{7}\\u{1B}[2J\"; run `devtrust --help` for the list\n", "\(result.stderr)")
    }
}
