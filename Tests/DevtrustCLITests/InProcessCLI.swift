@testable import DevtrustCLI
import DevtrustDevice
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeys
import DevtrustSignIn
@testable import DevtrustTerminal
import DevtrustTestSupport
import Foundation
import Testing

/// A terminal for commands run in-process: what they write to stdout and stderr is
/// kept; stdin is given, and prompts read their answers from it line by line, as
/// from a real stdin; whether stdin and stderr are terminals, and the size of
/// stderr's window, are set by the test.
final class CapturingTerminal: Terminal {
    /// A question a command asked: its text, and whether the answer was read without echo.
    struct Prompt: Equatable {
        let text: String
        let isSecret: Bool
    }

    private(set) var output = ""
    /// What was written as bytes (a binary protocol's frames).
    private(set) var outputBytes = [UInt8]()
    private(set) var errors = ""
    private(set) var prompts = [Prompt]()
    private var input: [UInt8]
    let inputIsTerminal: Bool
    let errorIsTerminal: Bool
    let errorSize: TerminalSize?

    init(stdin: [UInt8] = [], inputIsTerminal: Bool = false, errorIsTerminal: Bool = false, errorSize: TerminalSize? = nil) {
        input = stdin
        self.inputIsTerminal = inputIsTerminal
        self.errorIsTerminal = errorIsTerminal
        self.errorSize = errorIsTerminal ? errorSize : nil
    }

    func writeOutput(_ text: String) { output += text }
    func writeError(_ text: String) { errors += text }

    func readInput(limit: Int) -> [UInt8]? {
        defer { input = [] }
        return input.count > limit ? nil : input
    }

    func readInputBytes(upTo count: Int) -> [UInt8] {
        let taken = Array(input.prefix(count))
        input.removeFirst(taken.count)
        return taken
    }

    func writeOutputBytes(_ bytes: [UInt8]) -> Bool {
        outputBytes += bytes
        return true
    }

    func readLine(prompt: String) -> String? {
        ask(prompt, isSecret: false)
    }

    func readSecret(prompt: String) -> String? {
        let answer = ask(prompt, isSecret: true)
        // The process terminal ends a hidden answer's line itself (the newline typed was not echoed).
        if inputIsTerminal { writeError("\n") }
        return answer
    }

    private func ask(_ prompt: String, isSecret: Bool) -> String? {
        prompts.append(Prompt(text: prompt, isSecret: isSecret))
        writeError(TerminalText.printable(prompt))
        guard !input.isEmpty else { return nil }
        let line = input.firstIndex(of: 0x0A).map { input[..<$0] } ?? input[...]
        input.removeFirst(min(line.count + 1, input.count))
        return String(decoding: line, as: UTF8.self)
    }
}

/// `devtrust` run in this process through `DevtrustCommandLine.run`, with the
/// environment `DevtrustBinary` gives the binary, a capturing terminal, and the
/// clock and randomness the test chooses. For what needs a process of its own
/// (signals, file descriptors, memory, the real environment, dlopen at start,
/// other users, a pty), use `DevtrustBinary`.
struct InProcessCLI: DevtrustRunner {
    let keystore: String
    var extraEnvironment: [String: String] = [:]
    var clock: any Clock = SystemClock()
    var random: any RandomSource = SystemRandom()
    var inputIsTerminal = false
    var errorIsTerminal = false
    /// The window of stderr when it is a terminal (nil: a size the terminal does not say).
    var errorSize: TerminalSize?
    /// What the fast tier puts in place of the network, time and the TPM (`FakeServerSetup`); nil
    /// for each: the real one (curl, the system's clocks and waits, the key as loaded).
    var httpTransport: (@Sendable (HTTPOptions) -> any HTTPClient)?
    var waiting: (any Waiting)?
    var bootClock: (@Sendable () -> BootClockReading)?
    var keyInUse: (@Sendable (any DeviceKey) -> any DeviceKey)?
    /// The root the posture collectors read below ("": this machine's files).
    var postureRoot = ""

    init(keystore: String) {
        self.keystore = keystore
    }

    /// What a run printed and returned, and the prompts it showed.
    struct Run {
        let result: ProcessResult
        let prompts: [CapturingTerminal.Prompt]
    }

    func run(_ arguments: [String], stdin: [UInt8]?) throws -> ProcessResult {
        session(arguments, stdin: stdin).result
    }

    func session(_ arguments: [String], stdin: [UInt8]? = nil) -> Run {
        // In-process, devtrust sees only the variables CommandEnvironment.process() would
        // read: a test that sets another (LD_PRELOAD, PATH for a helper) needs the binary.
        for name in extraEnvironment.keys where !CommandEnvironment.knownVariables.contains(name) {
            Issue.record("\(name) is read by the process, not through CommandEnvironment: run this test with DevtrustBinary")
        }
        // The children devtrust starts (the admin's collector, xdg-open) inherit the process's
        // environment: in-process, the test runner's, not the one the test set up.
        let configuration = environment["DEVTRUST_CONFIG"].flatMap { FileManager.default.contents(atPath: $0) }
        if arguments.contains("--open") || configuration.map({ String(decoding: $0, as: UTF8.self).contains("\"collector\"") }) == true {
            Issue.record("devtrust starts a child process here, which inherits the process's environment: run this test with DevtrustBinary")
        }
        if extraEnvironment["DEVTRUST_HTTP_DEBUG"] != nil {
            Issue.record("libcurl's debug lines go to file descriptor 2, not through the Terminal: run this test with DevtrustBinary")
        }
        let variables = environment.filter { CommandEnvironment.knownVariables.contains($0.key) }
        Self.requireOwnDirectories(variables)
        let terminal = CapturingTerminal(stdin: stdin ?? [], inputIsTerminal: inputIsTerminal, errorIsTerminal: errorIsTerminal, errorSize: errorSize)
        // The system agent's default socket is the test's own (never there): no test depends on the machine's /run.
        var environment = CommandEnvironment(variables: variables, terminal: terminal, clock: clock, random: random,
                                             defaultAgentSocket: keystore + "-no-agent.sock")
        if let httpTransport { environment.httpTransport = httpTransport }
        if let waiting { environment.waiting = { _ in waiting } }
        if let bootClock { environment.bootClock = bootClock }
        if let keyInUse { environment.keyInUse = keyInUse }
        environment.postureRoot = postureRoot
        let status = DevtrustCommandLine.run(arguments, environment: environment)
        return Run(result: ProcessResult(status: status, stdout: terminal.output, stderr: terminal.errors), prompts: terminal.prompts)
    }

    /// One command with the given variables (no keystore set up), for parsing, help and
    /// errors that come before any keystore is read; its keystore, cache and configuration
    /// are still its own (`ownEnvironment`), where the given variables name none.
    static func run(_ arguments: [String], variables: [String: String] = [:], stdin: String? = nil,
                    clock: any Clock = SystemClock(), random: any RandomSource = SystemRandom(),
                    inputIsTerminal: Bool = false, errorIsTerminal: Bool = false) -> (exitCode: Int32, stdout: String, stderr: String) {
        let directory = TemporaryDirectory("in-process")
        let terminal = CapturingTerminal(stdin: Array((stdin ?? "").utf8), inputIsTerminal: inputIsTerminal, errorIsTerminal: errorIsTerminal)
        let status = DevtrustCommandLine.run(arguments, environment: ownEnvironment(variables, in: directory, terminal: terminal, clock: clock, random: random))
        return (status, terminal.output, terminal.errors)
    }

    /// A command environment for devtrust's code run in this process outside `InProcessCLI`
    /// (a `CommandContext` built by a test): `variables` and a keystore, cache and configuration
    /// of its own below `directory`, which the test keeps while the code runs.
    static func ownEnvironment(_ variables: [String: String] = [:], in directory: TemporaryDirectory, terminal: any Terminal,
                            clock: any Clock = SystemClock(), random: any RandomSource = SystemRandom()) -> CommandEnvironment {
        let variables = OwnDirectories.withoutTheMachinesTPM(OwnDirectories.variables(in: directory.path).merging(variables) { $1 })
        requireOwnDirectories(variables)
        return CommandEnvironment(variables: variables, terminal: terminal, clock: clock, random: random, defaultAgentSocket: directory.file("no-agent.sock"))
    }

    /// Fails the test when devtrust would choose a directory by itself: run as root (as here
    /// and on CI), the machine's /var/lib/devtrust, /var/cache/devtrust or /etc/devtrust.
    static func requireOwnDirectories(_ variables: [String: String], sourceLocation: SourceLocation = #_sourceLocation) {
        let unnamed = OwnDirectories.unnamed(in: variables)
        if !unnamed.isEmpty {
            Issue.record("devtrust would use the machine's (or this user's) own \(unnamed.joined(separator: ", ")): name the test's own",
                         sourceLocation: sourceLocation)
        }
    }
}

extension DeviceFixture where CLI == InProcessCLI {
    init(softwareKey: Bool = true) throws {
        try self.init({ InProcessCLI(keystore: $0) }, softwareKey: softwareKey)
    }
}

extension ReferenceServerFixture where CLI == InProcessCLI {
    init(_ serverArguments: [String] = [], softwareKey: Bool = true, register: Bool = false) throws {
        try self.init({ InProcessCLI(keystore: $0) }, serverArguments: serverArguments, softwareKey: softwareKey, register: register)
    }
}
