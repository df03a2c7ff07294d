import Foundation

/// A helper program a test starts (a Python server, proxy or interposer) that
/// prints one line once it accepts connections, such as "listening on URL";
/// killed when released.
public final class ListeningProcess: @unchecked Sendable {
    /// The first line it printed, without the newline.
    public let firstLine: String
    private let process = Process()

    /// - Parameters:
    ///   - prefix: what the first line must start with; what follows is `announced`.
    ///   - what: names the program in the error when it does not start.
    public init(_ executable: String, _ arguments: [String], expecting prefix: String = "listening on ", what: String) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // One deadline for the whole line (poll, then read what is there): long enough
        // for a loaded machine, and a program that hangs before its line fails the test
        // instead of hanging the run. (A deadline between bytes cut lines short.)
        let descriptor = output.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(120)
        var line = [UInt8]()
        reading: while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { break }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, Int32(min(left, 1) * 1000))
            if polled < 0 && errno == EINTR { continue }
            if polled <= 0 { continue }
            var byte: UInt8 = 0
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == 0x0A { break reading }
            line.append(byte)
        }
        firstLine = String(decoding: line, as: UTF8.self)
        guard firstLine.hasPrefix(prefix) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw FixtureError("\(what) did not start within 120 s: \(firstLine.isEmpty ? "it printed nothing" : firstLine)")
        }
        announced = String(firstLine.dropFirst(prefix.count))
    }

    /// The first line after the expected prefix (a URL, a port).
    public let announced: String

    public var isRunning: Bool { process.isRunning }
    public var processIdentifier: Int32 { process.processIdentifier }

    deinit { stop() }

    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
