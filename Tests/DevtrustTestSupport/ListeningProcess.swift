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
        // No deadline: the read blocks until the line or the program's end, and a
        // deadline checked between bytes cut the line short on a loaded machine.
        var line = [UInt8]()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte.first == 0x0A { break }
            line.append(byte.first!)
        }
        firstLine = String(decoding: line, as: UTF8.self)
        guard firstLine.hasPrefix(prefix) else {
            process.terminate()
            throw SwtpmError("\(what) did not start: \(firstLine)")
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
