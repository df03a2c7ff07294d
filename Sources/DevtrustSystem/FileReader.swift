import DevtrustEncoding
import CFileSystemIdentity
import DevtrustErrors
import Glibc

public struct FileReadError: Error, Equatable, Sendable, CustomStringConvertible {
    public let path: String
    /// The errno of the failing call, or 0 when the file was too large.
    public let code: Int32
    public let limit: Int
    /// Why, when errno does not say it (a file not owned by the user it is read for).
    public var detail: String?

    public init(path: String, code: Int32, limit: Int, detail: String? = nil) {
        self.path = path
        self.code = code
        self.limit = limit
        self.detail = detail
    }

    public var isMissing: Bool { code == ENOENT }

    /// Why, without the path: "No such file or directory", "larger than 1048576 bytes",
    /// "not a regular file" (`readRegularFile`).
    public var reason: String {
        if let detail { return detail }
        switch code {
        case 0: return "larger than \(limit) bytes"
        case EINVAL: return "not a regular file"
        default: return String(cString: strerror(code))
        }
    }

    public var description: String { "cannot read \(path): \(reason)" }
}

/// A user a file is read for: their uid and primary gid.
public struct FileOwner: Equatable, Sendable {
    public let uid: UInt32
    public let gid: UInt32

    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }
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

    /// Reads into one buffer, no intermediate chunk: a key file being
    /// imported leaves no copy behind (a buffer it outgrows is wiped).
    static func read(descriptor file: Int32, path: String, limit: Int) throws(FileReadError) -> [UInt8] {
        var contents = [UInt8](repeating: 0, count: min(limit + 1, 16_384))
        var filled = 0
        while true {
            if filled == contents.count {
                var larger = [UInt8](repeating: 0, count: min(contents.count * 2, limit + 1))
                larger.withUnsafeMutableBytes { target in contents.withUnsafeBytes { target.copyMemory(from: $0) } }
                contents.zeroize()
                contents = larger
            }
            let count = contents.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                contents.zeroize()
                throw FileReadError(path: path, code: code, limit: limit)
            }
            if count == 0 { break }
            filled += count
            guard filled <= limit else {
                contents.zeroize()
                throw FileReadError(path: path, code: 0, limit: limit)
            }
        }
        contents.removeLast(contents.count - filled)
        return contents
    }

    /// A file that something else named, read only when it is a regular file: not a FIFO, a
    /// device or a directory, which could block, never end, or act on being opened (a tape
    /// rewinds). The path is opened for its name only (O_PATH: nothing is opened for reading,
    /// no device acts), that file checked (fstat), and only then opened for reading, through
    /// /proc/self/fd (the same file, whatever the path names by then), without blocking, and
    /// read up to `limit`. A symbolic link is followed (home-manager and stow install such files
    /// as links) to a regular file only. Another kind fails with EINVAL ("not a regular file").
    public static func readRegularFile(_ path: String, limit: Int = 1 << 20) throws(FileReadError) -> [UInt8] {
        try readRegularFile(path, limit: limit, checkOwner: nil)
    }

    /// `readRegularFile`, for a user other than this process's (the system agent, as root, reading a
    /// client's desktop settings): the path is followed and the file opened with that user's
    /// file-system uid and gid (this thread only), so that the kernel allows what it allows that
    /// user and no more; and the file must be theirs. A link from their home to another user's
    /// file, or to one of root's, is refused (EACCES), not read with the reader's rights.
    public static func readRegularFile(_ path: String, limit: Int = 1 << 20, asUser owner: FileOwner) throws(FileReadError) -> [UInt8] {
        var previousUID: uid_t = 0, previousGID: gid_t = 0
        guard devtrust_set_fs_identity(owner.uid, owner.gid, &previousUID, &previousGID) == 0 else {
            throw FileReadError(path: path, code: EPERM, limit: limit, detail: "cannot take uid \(owner.uid)'s file-system identity to read it")
        }
        defer { _ = devtrust_set_fs_identity(previousUID, previousGID, &previousUID, &previousGID) }
        return try readRegularFile(path, limit: limit, checkOwner: owner.uid)
    }

    private static func readRegularFile(_ path: String, limit: Int, checkOwner: UInt32?) throws(FileReadError) -> [UInt8] {
        // O_PATH (Linux's 010000000), which Swift's Glibc module does not export.
        let pathOnly: Int32 = 0o10000000
        let named = open(path, pathOnly | O_CLOEXEC)
        guard named >= 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        defer { close(named) }
        var found = stat()
        guard fstat(named, &found) == 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        guard found.st_mode & S_IFMT == S_IFREG else { throw FileReadError(path: path, code: EINVAL, limit: limit) }
        if let checkOwner, found.st_uid != checkOwner {
            throw FileReadError(path: path, code: EACCES, limit: limit, detail: "owned by uid \(found.st_uid), not by uid \(checkOwner) whose file it is read as")
        }
        var file = open("/proc/self/fd/\(named)", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        if file < 0 && errno == ENOENT {
            // No /proc (a chroot without it): the path again, checked after it is opened.
            file = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        }
        guard file >= 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        defer { close(file) }
        var opened = stat()
        guard fstat(file, &opened) == 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        guard opened.st_mode & S_IFMT == S_IFREG, opened.st_dev == found.st_dev, opened.st_ino == found.st_ino else {
            throw FileReadError(path: path, code: EINVAL, limit: limit)
        }
        return try read(descriptor: file, path: path, limit: limit)
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }
}

extension FileReadError: ClassifiedError {
    /// A file devtrust reads cannot be read. A failure (exit 1), in its own words.
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
}
