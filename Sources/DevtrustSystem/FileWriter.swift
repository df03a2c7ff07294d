import Glibc

public struct FileWriteError: Error, Equatable, Sendable, CustomStringConvertible {
    public let path: String
    /// What was being done: "create the directory", "write", "replace", "remove".
    public let operation: String
    public let code: Int32

    /// Whether another user (root) could do it: permission denied, a read-only file system.
    public var needsPrivilege: Bool { code == EACCES || code == EPERM || code == EROFS }

    public var description: String { "cannot \(operation) \(path): \(String(cString: strerror(code)))" }
}

/// Files devtrust puts outside its keystore for other programs to read (a
/// browser's host manifests): written whole or not at all, never through a
/// symbolic link, with the mode given whatever the umask.
public enum FileWriter {
    /// Creates `path` and its missing parents with `mode`; existing ones are left as they are.
    public static func makeDirectories(_ path: String, mode: mode_t) throws(FileWriteError) {
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            var status = stat()
            if lstat(prefix, &status) == 0 {
                // A link to a directory is followed, as a user's ~/.config may be one.
                if (status.st_mode & S_IFMT) == S_IFDIR || stat(prefix, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR { continue }
                throw FileWriteError(path: prefix, operation: "create the directory", code: ENOTDIR)
            }
            guard errno == ENOENT else { throw FileWriteError(path: prefix, operation: "look up", code: errno) }
            guard mkdir(prefix, mode) == 0 || errno == EEXIST else { throw FileWriteError(path: prefix, operation: "create the directory", code: errno) }
            // mkdir applies the umask.
            _ = chmod(prefix, mode)
        }
    }

    /// Replaces `path` with `bytes` in one step (a temporary file beside it, renamed
    /// over it), mode `mode`. A symbolic link at `path` is replaced, not followed.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t) throws(FileWriteError) {
        let temporary = path + ".tmp-\(getpid())"
        let file = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard file >= 0 else { throw FileWriteError(path: path, operation: "write", code: errno) }
        var failure: FileWriteError?
        if fchmod(file, mode) != 0 { failure = FileWriteError(path: path, operation: "write", code: errno) }
        var written = 0
        while failure == nil && written < bytes.count {
            let count = bytes.withUnsafeBytes { write(file, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                failure = FileWriteError(path: path, operation: "write", code: errno)
            } else {
                written += count
            }
        }
        if failure == nil && fsync(file) != 0 { failure = FileWriteError(path: path, operation: "write", code: errno) }
        if close(file) != 0 && failure == nil { failure = FileWriteError(path: path, operation: "write", code: errno) }
        if failure == nil && rename(temporary, path) != 0 { failure = FileWriteError(path: path, operation: "replace", code: errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }

    /// Removes the file; a file that is not there is no error.
    public static func remove(_ path: String) throws(FileWriteError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw FileWriteError(path: path, operation: "remove", code: errno) }
    }

    /// Removes the directory if it is empty; whether it did.
    @discardableResult
    public static func removeIfEmpty(directory path: String) -> Bool {
        rmdir(path) == 0
    }

    /// What is at `path` without following a link: nil when nothing is.
    public static func kind(of path: String) throws(FileWriteError) -> FileKind? {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw FileWriteError(path: path, operation: "look up", code: errno)
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .regularFile
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        default: return .other
        }
    }
}

public enum FileKind: Sendable, Equatable {
    case regularFile, directory, symbolicLink, other
}
