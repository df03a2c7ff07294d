import CProcessHardening
import Glibc

/// Where a command writes and reads. The real process uses file descriptors
/// 0, 1 and 2; tests run commands in-process with captured streams.
public protocol Terminal: AnyObject {
    func writeOutput(_ text: String)
    func writeError(_ text: String)
    /// All of standard input (up to `limit` bytes), or nil past the limit.
    func readInput(limit: Int) -> [UInt8]?
    /// What standard input has next, 1 to `count` bytes, as soon as some arrive
    /// (a binary protocol's frames); empty at its end.
    func readInputBytes(upTo count: Int) -> [UInt8]
    /// Bytes on stdout exactly as given (a binary protocol's frames); false when
    /// stdout is closed.
    func writeOutputBytes(_ bytes: [UInt8]) -> Bool
    /// One line from the user, or nil at end of input.
    func readLine(prompt: String) -> String?
    /// One line read without echo (passwords, codes), or nil at end of input.
    func readSecret(prompt: String) -> String?
    var inputIsTerminal: Bool { get }
    var errorIsTerminal: Bool { get }
    /// The window size of the terminal on stderr; nil when stderr is no
    /// terminal or the terminal does not know its size (0 x 0).
    var errorSize: TerminalSize? { get }
    /// Whether stdout is a terminal (`doctor` colours its report there).
    var outputIsTerminal: Bool { get }
    /// Whether this process is in the foreground job of the terminal on stderr (what
    /// the user types goes to it): a background job (`&`, or Ctrl-Z then `bg`) does not
    /// rewrite the line the user is typing on. Asked each time: the job can move.
    var errorIsForeground: Bool { get }
}

extension Terminal {
    public var outputIsTerminal: Bool { false }
    /// Captured streams have no jobs: always in the foreground.
    public var errorIsForeground: Bool { true }
}

/// A terminal window's size in character cells; both from 1 to `largest`.
public struct TerminalSize: Equatable, Sendable, CustomStringConvertible {
    public let columns: Int
    public let rows: Int

    /// Larger sizes are taken as this: no window is that large, and a size from
    /// COLUMNS or a pty can be any number (Int.max would overflow the layout's arithmetic).
    public static let largest = 1000

    /// Nil when either is 0 or less: a size nobody set, which says nothing.
    public init?(columns: Int, rows: Int) {
        guard columns > 0, rows > 0 else { return nil }
        self.columns = min(columns, Self.largest)
        self.rows = min(rows, Self.largest)
    }

    public var description: String { "\(columns)×\(rows)" }
}

/// The process's own standard streams.
public final class ProcessTerminal: Terminal {
    public init() {}

    public func writeOutput(_ text: String) { _ = Self.writeAll(1, Array(text.utf8)) }
    public func writeError(_ text: String) { _ = Self.writeAll(2, Array(text.utf8)) }
    public func writeOutputBytes(_ bytes: [UInt8]) -> Bool { Self.writeAll(1, bytes) }

    public var inputIsTerminal: Bool { isatty(0) == 1 }
    /// Asked once: the colour of every line and the network-wait indicator depend on it.
    public private(set) lazy var errorIsTerminal: Bool = isatty(2) == 1
    public var outputIsTerminal: Bool { isatty(1) == 1 }

    public var errorSize: TerminalSize? {
        var columns: Int32 = 0, rows: Int32 = 0
        guard devtrust_terminal_size(2, &columns, &rows) == 0 else { return nil }
        return TerminalSize(columns: Int(columns), rows: Int(rows))
    }

    /// As git's progress display asks (is_foreground_fd): the terminal's foreground process group is this process's.
    public var errorIsForeground: Bool { tcgetpgrp(2) == getpgrp() }

    public func readInput(limit: Int) -> [UInt8]? {
        var contents = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(0, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            contents += chunk.prefix(count)
            if contents.count > limit { return nil }
        }
        return contents
    }

    public func readInputBytes(upTo count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        while true {
            let received = bytes.withUnsafeMutableBytes { read(0, $0.baseAddress, count) }
            if received < 0 && errno == EINTR { continue }
            return Array(bytes.prefix(max(received, 0)))
        }
    }

    public func readSecret(prompt: String) -> String? {
        var saved = termios()
        guard isatty(0) == 1, tcgetattr(0, &saved) == 0 else { return readLine(prompt: prompt) }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSAFLUSH, &silent)
        defer {
            tcsetattr(0, TCSAFLUSH, &saved)
            writeError("\n")
        }
        return readLine(prompt: prompt)
    }

    public func readLine(prompt: String) -> String? {
        writeError(TerminalText.printable(prompt))
        var line = [UInt8]()
        var byte: UInt8 = 0
        while true {
            let count = read(0, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// False when the stream is closed or fails.
    private static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                return false
            }
            written += count
        }
        return true
    }
}
