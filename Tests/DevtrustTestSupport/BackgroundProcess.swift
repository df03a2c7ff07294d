import Foundation

/// A program left running while the test talks to it (a `login --browser` that
/// listens), with its streams in files; killed when released if still running.
public final class BackgroundProcess: @unchecked Sendable {
    private let process = Process()
    private let scratch = TemporaryDirectory("devtrust-background")
    private let out: FileHandle
    private let err: FileHandle

    public init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        _ = FileManager.default.createFile(atPath: scratch.file("stdout"), contents: nil)
        _ = FileManager.default.createFile(atPath: scratch.file("stderr"), contents: nil)
        out = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.file("stdout")))
        err = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.file("stderr")))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var stdout: String { String(decoding: scratch.read("stdout") ?? [], as: UTF8.self) }
    public var stderr: String { String(decoding: scratch.read("stderr") ?? [], as: UTF8.self) }

    /// Whether the program has ended, even while Foundation has not noticed yet: Foundation
    /// learns of the end when a socket the child inherited closes, which a grandchild that
    /// outlives it may hold open. Until then the ended program is a zombie.
    public var hasEnded: Bool {
        guard process.isRunning else { return true }
        guard let stat = FileManager.default.contents(atPath: "/proc/\(process.processIdentifier)/stat"),
              let text = String(data: stat, encoding: .utf8), let close = text.lastIndex(of: ")") else { return true }
        return text[text.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// Polls until `condition` holds on what the program printed (stdout, stderr), or the time is up
    /// (by default a time a loaded machine needs, not an idle one: it is spent only on a failure).
    @discardableResult
    public func waitFor(seconds: Double = 60, _ condition: (_ stdout: String, _ stderr: String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(stdout, stderr) { return true }
            if !process.isRunning { return condition(stdout, stderr) }
            usleep(20_000)
        }
        return false
    }

    /// Waits for the program to end; nil (and the program killed) when it is still running after `seconds`.
    public func finish(seconds: Double = 60) -> ProcessResult? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        try? out.close()
        try? err.close()
        return ProcessResult(status: process.terminationStatus, stdout: stdout, stderr: stderr,
                             signaled: process.terminationReason == .uncaughtSignal)
    }
}
