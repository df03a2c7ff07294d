import Foundation

/// A program run in a real terminal emulator: a detached tmux session of a
/// chosen size, on a tmux server and socket of its own (tests run in
/// parallel), whose screen a test reads as a person would see it. Everything
/// the program writes is recorded as well (`pipe-pane`): the program starts
/// only once the recording runs. When the program ends its last screen stays
/// to be read. The tmux server, and the program with it, is killed when the
/// value is released (or by `stop`).
public final class TmuxSession: @unchecked Sendable {
    public static let path = "/usr/bin/tmux"
    /// Run the test when tmux is here, or always on CI (where its absence must fail).
    public static var shouldRun: Bool { FileManager.default.isExecutableFile(atPath: path) || ExternalTool.isCI }

    public let columns: Int
    public let rows: Int
    private let directory = TemporaryDirectory("tmux")
    private static let session = "devtrust"
    private var socket: String { directory.file("socket") }
    private var recording: String { directory.file("output") }

    /// - Parameters:
    ///   - command: the program and its arguments, run directly (no shell).
    ///   - environment: the program's environment (tmux adds TERM, TMUX and TMUX_PANE).
    public init(columns: Int, rows: Int, command: [String], environment: [String: String]) throws {
        self.columns = columns
        self.rows = rows
        // A shell waits for the recording, runs the program and writes down its exit status
        // (tmux's own #{pane_dead_status} is not always there: its server does not always reap at once).
        let gate = directory.file("start")
        let waitThenRun = ["/bin/sh", "-c", #"while [ ! -e "$0" ]; do sleep 0.02; done; "$@"; echo $? > "$0.status-"; mv "$0.status-" "$0.status""#, gate] + command
        try tmux(["new-session", "-d", "-s", Self.session, "-x", "\(columns)", "-y", "\(rows)", "--"] + waitThenRun, environment: environment)
        try tmux(["set-option", "-w", "-t", Self.session, "remain-on-exit", "on"])
        _ = FileManager.default.createFile(atPath: recording, contents: nil)
        try tmux(["pipe-pane", "-t", Self.session, "exec cat >> '\(recording)'"])
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
    }

    deinit { stop() }

    /// Kills the tmux server and the program in it.
    public func stop() {
        _ = try? tmux(["kill-server"])
    }

    /// The visible screen, one string per row (`rows` of them), trailing spaces trimmed;
    /// with `escapes`, with the escape sequences of the text's attributes (bold, colours),
    /// each only where the attributes change (so they carry on from one row to the next);
    /// with `trailingSpaces`, spaces the program wrote at the end of a row are kept
    /// (they show when they have a background colour).
    public func screen(escapes: Bool = false, trailingSpaces: Bool = false) throws -> [String] {
        let captured = try tmux(["capture-pane", "-p", "-t", Self.session] + (escapes ? ["-e"] : []) + (trailingSpaces ? ["-N"] : []))
        var lines = captured.stdout.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    /// The screen once `condition` holds for it, or nil when it did not within `timeout` seconds.
    public func waitForScreen(timeout: Double = 60, _ condition: ([String]) -> Bool) throws -> [String]? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            let screen = try screen()
            if condition(screen) { return screen }
            usleep(100_000)
        } while Date() < deadline
        return nil
    }

    /// Everything the program wrote so far, escape sequences included.
    public var output: String {
        String(decoding: FileManager.default.contents(atPath: recording) ?? Data(), as: UTF8.self)
    }

    /// The program's exit status once it has ended, else nil.
    public func exitStatus() -> Int32? {
        guard let written = directory.read("start.status") else { return nil }
        return Int32(String(decoding: written, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Types `text` (literally, no key names).
    public func type(_ text: String) throws {
        try tmux(["send-keys", "-t", Self.session, "-l", text])
    }

    /// Runs tmux and waits for it. Not with Foundation's Process: the server that the first
    /// command starts would keep the descriptor by which Process learns that its child ended
    /// (and those of other tests' children running at the time), so that waiting for tmux would
    /// wait for the server. Here tmux gets only its standard streams, and signals unblocked
    /// (a test runner's threads block most, and children inherit the mask).
    @discardableResult
    private func tmux(_ arguments: [String], environment: [String: String] = ["PATH": "/usr/bin:/bin"]) throws -> ProcessResult {
        let scratch = TemporaryDirectory("tmux-run")
        let stdout = scratch.file("stdout"), stderr = scratch.file("stderr")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // glibc 2.34's posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not declare.
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let closeFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw TmuxError("this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)")
        }
        _ = unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = [Self.path, "-S", socket, "-f", "/dev/null"] + arguments
        let envp = environment.map { "\($0.key)=\($0.value)" }
        var cArguments = argv.map { strdup($0) } + [nil]
        var cEnvironment = envp.map { strdup($0) } + [nil]
        defer { (cArguments + cEnvironment).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, Self.path, &actions, &attributes, &cArguments, &cEnvironment)
        guard spawned == 0 else { throw TmuxError("cannot start tmux: \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7F == 0
        let result = ProcessResult(status: exited ? (status >> 8) & 0xFF : status & 0x7F,
                                   stdout: String(decoding: scratch.read("stdout") ?? [], as: UTF8.self),
                                   stderr: String(decoding: scratch.read("stderr") ?? [], as: UTF8.self), signaled: !exited)
        guard result.status == 0 || arguments == ["kill-server"] else {
            throw TmuxError("tmux \(arguments.first ?? ""): \(result)")
        }
        return result
    }
}

public struct TmuxError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
