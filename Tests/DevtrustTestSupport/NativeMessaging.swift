import DevtrustEncoding
import Foundation

/// The browsers' native messaging protocol as the browser speaks it to a host:
/// each message a 4-byte little-endian length (the byte order of the machines
/// devtrust runs on), then the JSON. A browser's side, written apart from devtrust's.
public enum NativeMessaging {
    /// The origin Chromium passes for devtrust's extension.
    public static let chromiumCaller = "chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf/"
    /// What Firefox passes: the host manifest's path, then the add-on's ID.
    public static func firefoxCaller(manifest: String = "/usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json") -> [String] {
        [manifest, "host@devtrust.dev"]
    }

    public static func frame(_ json: String) -> [UInt8] {
        frame(bytes: Array(json.utf8))
    }

    public static func frame(_ value: JSONValue) -> [UInt8] {
        frame(bytes: JSONWriter.bytes(value))
    }

    public static func frame(bytes: [UInt8]) -> [UInt8] {
        length(UInt32(bytes.count)) + bytes
    }

    public static func length(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF), UInt8(value >> 24)]
    }

    /// The whole messages in a host's output, and what is left that is not one.
    public static func messages(in output: [UInt8]) -> (messages: [[UInt8]], rest: [UInt8]) {
        var messages = [[UInt8]]()
        var offset = 0
        while output.count - offset >= 4 {
            let length = Int(output[offset]) | Int(output[offset + 1]) << 8 | Int(output[offset + 2]) << 16 | Int(output[offset + 3]) << 24
            guard output.count - offset - 4 >= length else { break }
            messages.append(Array(output[(offset + 4)..<(offset + 4 + length)]))
            offset += 4 + length
        }
        return (messages, Array(output[offset...]))
    }
}

/// One run of a host with all of its input given at once (then end of input),
/// as `sendNativeMessage` does; killed when it runs past its time.
public struct NativeHostRun: CustomStringConvertible {
    public let status: Int32
    public let signaled: Bool
    public let timedOut: Bool
    /// Each reply, parsed (nil for one that is not a JSON object).
    public let replies: [JSONObject?]
    /// Output bytes that are not a whole message.
    public let rest: [UInt8]
    public let stderr: String

    public var description: String {
        "exit \(status)\(signaled ? " (signal)" : "")\(timedOut ? " (timed out)" : ""), replies \(replies.map { $0.map { JSONWriter.string(.object($0)) } ?? "(not an object)" }), "
            + "\(rest.count) stray bytes, stderr: \(stderr)"
    }

    /// Runs `executable arguments` in `environment` with `input` on stdin.
    public init(_ executable: String, _ arguments: [String], environment: [String: String], input: [UInt8], seconds: Double = 60) throws {
        let scratch = TemporaryDirectory("native-host-run")
        _ = FileManager.default.createFile(atPath: scratch.file("stdin"), contents: Data(input))
        _ = FileManager.default.createFile(atPath: scratch.file("stdout"), contents: nil)
        _ = FileManager.default.createFile(atPath: scratch.file("stderr"), contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let stdin = try FileHandle(forReadingFrom: URL(fileURLWithPath: scratch.file("stdin")))
        let stdout = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.file("stdout")))
        let stderr = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.file("stderr")))
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        timedOut = process.isRunning
        if timedOut { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try stdin.close(); try stdout.close(); try stderr.close()
        status = process.terminationStatus
        signaled = process.terminationReason == .uncaughtSignal
        let (messages, rest) = NativeMessaging.messages(in: scratch.read("stdout") ?? [])
        replies = messages.map { try? JSONParser.parse($0).objectValue }
        self.rest = rest
        self.stderr = String(decoding: scratch.read("stderr") ?? [], as: UTF8.self)
    }
}

/// A host kept running with its stdin open, as `connectNative` keeps it: the
/// test sends a message, waits for the reply, and closes stdin when it is done.
public final class NativeHostSession: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors: FileHandle
    private let scratch = TemporaryDirectory("native-host-session")
    private var received = [UInt8]()

    public init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        _ = FileManager.default.createFile(atPath: scratch.file("stderr"), contents: nil)
        errors = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.file("stderr")))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    public var stderr: String { String(decoding: scratch.read("stderr") ?? [], as: UTF8.self) }

    public func send(_ bytes: [UInt8]) {
        input.fileHandleForWriting.write(Data(bytes))
    }

    /// The next reply, parsed; nil when none came within `seconds` (or the host ended first).
    public func receive(seconds: Double = 60) -> JSONObject? {
        let deadline = Date().addingTimeInterval(seconds)
        let descriptor = output.fileHandleForReading.fileDescriptor
        while true {
            let (messages, _) = NativeMessaging.messages(in: received)
            if let first = messages.first {
                received.removeFirst(4 + first.count)
                return try? JSONParser.parse(first).objectValue
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var polled = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&polled, 1, Int32(min(left, 1) * 1000)) >= 0 else { return nil }
            guard polled.revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return nil }
            received += chunk.prefix(count)
        }
    }

    /// Ends the host's input, as the browser does when the port closes.
    public func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    /// The exit status once the host ended, or nil (and the host killed) after `seconds`.
    public func finish(seconds: Double = 60) -> (status: Int32, signaled: Bool)? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }
}
