import Foundation

/// What a finished process printed and returned.
public struct ProcessResult: Sendable, CustomStringConvertible {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    /// Whether the process was killed by a signal (status is then the signal number).
    public let signaled: Bool

    public init(status: Int32, stdout: String, stderr: String, signaled: Bool = false) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.signaled = signaled
    }

    public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// stdout without its single trailing newline.
    public var output: String {
        stdout.hasSuffix("\n") ? String(stdout.dropLast()) : stdout
    }
}

/// Runs programs with files (not pipes) for their streams, so nothing can deadlock.
public enum ProcessRunner {
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                           stdin: [UInt8]? = nil, currentDirectory: String? = nil) throws -> ProcessResult {
        let scratch = TemporaryDirectory("devtrust-run")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let outPath = scratch.file("stdout"), errPath = scratch.file("stderr"), inPath = scratch.file("stdin")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        _ = FileManager.default.createFile(atPath: inPath, contents: Data(stdin ?? []))
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: inPath))
        process.standardOutput = out
        process.standardError = err
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        process.waitUntilExit()
        try out.close(); try err.close(); try input.close()
        return ProcessResult(
            status: process.terminationStatus,
            stdout: String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self),
            stderr: String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self),
            signaled: process.terminationReason == .uncaughtSignal)
    }
}
