@testable import DevtrustCLI
import DevtrustTestSupport
import Foundation
import Testing

/// `devtrust completion bash|zsh|fish`: each script loaded in the real shell,
/// which completes prefixes of command lines; candidates are compared with
/// the specs the parser uses, so a new command or option cannot be left out.
@Suite struct CompletionTests {
    enum Shell: String, CaseIterable {
        case bash, zsh, fish

        var tool: ExternalTool {
            switch self {
            case .bash: return .bash
            case .zsh: return .zsh
            case .fish: return .fish
            }
        }
    }

    /// A directory with the scripts and `devtrust` on PATH (the scripts run it for profile names).
    struct Setup {
        let directory = TemporaryDirectory("completion")
        let cli: DevtrustBinary
        let config: String

        init() throws {
            cli = DevtrustBinary(keystore: directory.file("ks"))
            try FileManager.default.createDirectory(atPath: directory.file("bin"), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: directory.file("bin/devtrust"), withDestinationPath: cli.path)
            for shell in Shell.allCases {
                let script = try cli.run("completion", shell.rawValue)
                #expect(script.status == 0 && script.stderr.isEmpty, "\(shell): \(script)")
                directory.write(shell == .zsh ? "_devtrust" : "devtrust.\(shell.rawValue)", script.stdout)
            }
            directory.write("files/config.json", #"""
            {"signIn": {"profiles": {
              "work": {"server": "https://idp.example", "clientId": "client-secret-looking-id"},
              "home": {"discovery": "https://home.example/.well-known/openid-configuration", "clientId": "home-client"}}}}
            """#)
            directory.write("files/ca.pem", "")
            try FileManager.default.createDirectory(atPath: directory.file("files/keystores"), withIntermediateDirectories: true)
            config = directory.file("files/config.json")
        }

        var environment: [String: String] {
            ["PATH": directory.file("bin") + ":/usr/bin:/bin", "HOME": directory.file("home"), "XDG_CONFIG_HOME": directory.file("xdg-config"),
             "XDG_DATA_HOME": directory.file("xdg-data"), "XDG_CACHE_HOME": directory.file("xdg-cache"), "TERM": "xterm",
             "DEVTRUST_KEYSTORE": cli.keystore]
        }

        /// The candidates `shell` offers for `line` (which ends where the cursor is).
        func complete(_ shell: Shell, _ line: String) throws -> [String] {
            let result: ProcessResult
            switch shell {
            case .bash:
                // COMP_WORDS as bash splits a line: at blanks, and "=" on its own.
                var words = line.replacingOccurrences(of: "=", with: " = ").split(separator: " ", omittingEmptySubsequences: true).map(String.init)
                if line.hasSuffix(" ") { words.append("") }
                let quoted = words.map { "'" + $0 + "'" }.joined(separator: " ")
                result = try ProcessRunner.run(ExternalTool.bash.rawValue, ["--norc", "--noprofile", "-c", """
                    source \(directory.file("devtrust.bash"))
                    COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); COMP_LINE='\(line)'; COMP_POINT=${#COMP_LINE}
                    _devtrust
                    printf '%s\\n' "${COMPREPLY[@]}"
                    """], environment: environment)
            case .zsh:
                result = try ProcessRunner.run(ExternalTool.zsh.rawValue, ["-f", Repository.path("Tests/Interop/zsh_complete.zsh"), directory.path, line],
                                               environment: environment)
            case .fish:
                result = try ProcessRunner.run(ExternalTool.fish.rawValue, ["--no-config", "-c", "source \(directory.file("devtrust.fish")); complete -C \(Self.fishQuoted(line))"],
                                               environment: environment)
            }
            #expect(result.status == 0, "\(shell) \(line): \(result)")
            // fish puts a description after a tab; zsh lists a directory's entries by their names.
            return result.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }.filter { !$0.isEmpty }
        }

        static func fishQuoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "\\'") + "'" }
    }

    static let shellsHere = Shell.allCases.filter { $0.tool.shouldRun }

    @Test(arguments: shellsHere)
    func everyCommandAndEveryOptionIsCompleted(shell: Shell) throws {
        let setup = try Setup()
        let commands = CommandSpecs.commands.map(\.name)
        #expect(Set(try setup.complete(shell, "devtrust ")) == Set(commands), "\(shell)")
        let globalLongs = CommandSpecs.global.map(\.displayName)
        #expect(Set(try setup.complete(shell, "devtrust --")) == Set(globalLongs), "\(shell)")
        for command in CommandSpecs.commands {
            let offered = Set(try setup.complete(shell, "devtrust \(command.name) --"))
            #expect(offered == Set(globalLongs + command.options.map(\.displayName)), "\(shell) \(command.name): \(offered.sorted())")
        }
    }

    @Test(arguments: shellsHere)
    func valuesAreCompletedByKind(shell: Shell) throws {
        let setup = try Setup()
        // As a user types it: zsh completes no files below "/tmp//" (NSTemporaryDirectory() ends with a slash).
        let files = (setup.directory.file("files") as NSString).standardizingPath
        #expect(Set(try setup.complete(shell, "devtrust lo")) == ["login", "logout"])
        #expect(Set(try setup.complete(shell, "devtrust register --se")) == ["--server"])
        #expect(Set(try setup.complete(shell, "devtrust init --backend ")) == ["auto", "tpm", "software"])
        #expect(Set(try setup.complete(shell, "devtrust pubkey --format=j")).contains { $0.hasSuffix("jwk") })
        #expect(Set(try setup.complete(shell, "devtrust help re")) == ["register", "reset"])
        #expect(Set(try setup.complete(shell, "devtrust completion ")) == ["bash", "zsh", "fish"])
        #expect(Set(try setup.complete(shell, "devtrust browser ")) == ["install", "uninstall"])
        // Files for file options, directories for directory options.
        let config = try setup.complete(shell, "devtrust --config \(files)/con")
        #expect(config.count == 1 && config[0].hasSuffix("config.json"), "\(shell): \(config)")
        let caFile = try setup.complete(shell, "devtrust status --ca-file \(files)/ca")
        #expect(caFile.count == 1 && caFile[0].hasSuffix("ca.pem"), "\(shell): \(caFile)")
        let keystore = try setup.complete(shell, "devtrust --keystore \(files)/")
        #expect(keystore.count == 1 && keystore[0].contains("keystores"), "\(shell): \(keystore)")
        // Sign-in profile names from the configuration the line names.
        #expect(Set(try setup.complete(shell, "devtrust --config \(setup.config) login --profile ")) == ["home", "work"], "\(shell)")
        #expect(Set(try setup.complete(shell, "devtrust --config \(setup.config) authorize-url --profile w")) == ["work"], "\(shell)")
        // --config=FILE, and a ~ the shell leaves unexpanded on the line.
        #expect(Set(try setup.complete(shell, "devtrust --config=\(setup.config) login --profile ")) == ["home", "work"], "\(shell)")
        let home = setup.directory.file("home")
        _ = setup.directory.write("home/tilde.json", #"{"signIn": {"profiles": {"tilde": {"server": "https://t.example", "clientId": "c"}}}}"#)
        #expect(Set(try setup.complete(shell, "devtrust --config ~/tilde.json login --profile ")) == ["tilde"], "\(shell) (HOME \(home))")
        #expect(Set(try setup.complete(shell, "devtrust --config=~/tilde.json login --profile ")) == ["tilde"], "\(shell)")
        // A value that is free text offers no files.
        #expect(try setup.complete(shell, "devtrust token --device-id ").isEmpty, "\(shell)")
    }

    /// A configuration file may come from anywhere: its profile names must not run as shell code
    /// (bash's compgen -W expands $(...) and globs) nor split into several candidates.
    @Test(arguments: Shell.allCases)
    func profileNamesAreNeverShellCode(_ shell: Shell) throws {
        let setup = try Setup()
        let marker = setup.directory.file("ran-\(shell.rawValue)")
        let config = setup.directory.write("files/hostile.json", #"{"signIn": {"profiles": {"work": {"server": "https://idp.example", "clientId": "c"}, "$(touch \#(marker))": {"server": "https://b.example", "clientId": "c"}, "`touch \#(marker)`": {"server": "https://b.example", "clientId": "c"}, "*": {"server": "https://c.example", "clientId": "c"}, "two words": {"server": "https://d.example", "clientId": "c"}, "a:b": {"server": "https://e.example", "clientId": "c"}, "-x": {"server": "https://f.example", "clientId": "c"}}}}"#)
        #expect(Set(try setup.complete(shell, "devtrust --config \(config) login --profile ")) == ["work"], "\(shell)")
        #expect(!FileManager.default.fileExists(atPath: marker), "\(shell) ran a profile name")
        let listed = try setup.cli.run("--config", config, "completion", "--list-profiles")
        #expect(listed.status == 0 && listed.stdout == "work\n", "\(listed)")
    }

    @Test func profileNamesAreAllThatIsListed() throws {
        let setup = try Setup()
        let listed = try setup.cli.run("--config", setup.config, "completion", "--list-profiles")
        #expect(listed.status == 0 && listed.stdout == "home\nwork\n" && listed.stderr.isEmpty, "\(listed)")
        #expect(try setup.cli.run("completion", "--list-profiles").stdout.isEmpty)
        let usage = try setup.cli.run("completion", "tcsh")
        #expect(usage.status == 2 && usage.stderr.contains("no completion for \"tcsh\": devtrust completes in bash, zsh and fish"), "\(usage)")
        #expect(try setup.cli.run("completion").status == 2)
    }

    /// Every option of every spec is named in each script, with its short name.
    @Test func everyScriptNamesEveryOption() throws {
        let scripts = CompletionScripts(global: CommandSpecs.global, commands: CommandSpecs.commands)
        for (shell, script) in [("bash", scripts.bash()), ("zsh", scripts.zsh()), ("fish", scripts.fish())] {
            for option in CommandSpecs.global + CommandSpecs.commands.flatMap(\.options) {
                let named = shell == "fish" ? script.contains("-l \(option.long) ") : script.contains(option.displayName)
                #expect(named, "\(shell) lacks \(option.displayName)")
                if let short = option.short {
                    #expect(script.contains(shell == "fish" ? "-s \(short) " : "-\(short)"), "\(shell) lacks -\(short)")
                }
            }
        }
    }
}
