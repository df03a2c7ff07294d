import Glibc

public struct FileReadError: Error, Equatable, Sendable, CustomStringConvertible {
    public let path: String
    /// The errno of the failing call, or 0 when the file was too large.
    public let code: Int32
    public let limit: Int

    public var isMissing: Bool { code == ENOENT }

    /// Why, without the path: "No such file or directory", "larger than 1048576 bytes".
    public var reason: String {
        code == 0 ? "larger than \(limit) bytes" : String(cString: strerror(code))
    }

    public var description: String { "cannot read \(path): \(reason)" }
}

/// Small whole-file reads with a size cap, for files devtrust does not own
/// (configuration, keys to verify with, system files).
public enum FileReader {
    public static func read(_ path: String, limit: Int = 1 << 20) throws(FileReadError) -> [UInt8] {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        defer { close(file) }
        return try read(descriptor: file, path: path, limit: limit)
    }

    static func read(descriptor file: Int32, path: String, limit: Int) throws(FileReadError) -> [UInt8] {
        var contents = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = Glibc.read(file, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileReadError(path: path, code: errno, limit: limit)
            }
            if count == 0 { return contents }
            contents += chunk.prefix(count)
            guard contents.count <= limit else { throw FileReadError(path: path, code: 0, limit: limit) }
        }
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }
}
