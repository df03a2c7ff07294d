import DevtrustErrors
import Glibc

public struct FileWriteError: Error, Equatable, Sendable, CustomStringConvertible {
    public let path: String
    /// What was being done: "create the directory", "write", "replace", "remove".
    public let operation: String
    public let code: Int32
    /// Why, when it is not the system's error text for `code`.
    public var reason: String?

    public init(path: String, operation: String, code: Int32, reason: String? = nil) {
        self.path = path
        self.operation = operation
        self.code = code
        self.reason = reason
    }

    /// Whether another user (root) could do it: permission denied, a read-only file system.
    public var needsPrivilege: Bool { reason == nil && (code == EACCES || code == EPERM || code == EROFS) }

    public var description: String { "cannot \(operation) \(path): \(reason ?? String(cString: strerror(code)))" }
}

/// An open directory that FileWriter works in: every operation is relative to
/// its descriptor, so renaming or replacing a directory on its path afterwards
/// cannot redirect them.
public final class WritableDirectory {
    public let path: String
    let descriptor: Int32

    init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    func child(_ name: String) -> String { (path == "/" ? "" : path) + "/" + name }
}

/// Files devtrust puts outside its keystore for other programs to read (a
/// browser's host manifests): written whole or not at all, never through a
/// symbolic link, with the mode given whatever the umask.
///
/// Directories are walked one component at a time from `/` with openat: a
/// directory this process creates is opened without following a link and
/// checked to be its own before its mode is set (fchmod), so that a user who
/// can write a parent cannot swap in a link between mkdir and chmod; an existing
/// symbolic link is followed only where nobody but this user and root could
/// have put it there (a user's ~/.config may be a link).
public enum FileWriter {
    /// Opens `path`, creating it and its missing parents with `mode` when `mode`
    /// is given (existing ones are left as they are); nil when it does not exist
    /// and `mode` is nil.
    public static func openDirectory(_ path: String, creatingWith mode: mode_t?) throws(FileWriteError) -> WritableDirectory? {
        guard path.hasPrefix("/") else { throw FileWriteError(path: path, operation: "open", code: EINVAL, reason: "not an absolute path") }
        let root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { throw FileWriteError(path: "/", operation: "open", code: errno) }
        var current = WritableDirectory(path: "/", descriptor: root)
        for component in path.split(separator: "/") {
            let name = String(component)
            guard let next = try step(into: name, of: current, creatingWith: mode) else { return nil }
            current = next
        }
        return current
    }

    /// The directory `name` inside `parent`: opened, or created with `mode`, or nil when it is missing and `mode` is nil.
    private static func step(into name: String, of parent: WritableDirectory, creatingWith mode: mode_t?) throws(FileWriteError) -> WritableDirectory? {
        let path = parent.child(name)
        for _ in 0..<3 {
            let descriptor = openat(parent.descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if descriptor >= 0 { return WritableDirectory(path: path, descriptor: descriptor) }
            switch errno {
            case ELOOP, ENOTDIR:
                // O_NOFOLLOW with O_DIRECTORY: a link is ELOOP or ENOTDIR.
                var status = stat()
                if fstatat(parent.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 && status.st_mode & S_IFMT == S_IFLNK {
                    return try followLink(name, in: parent)
                }
                throw FileWriteError(path: path, operation: "create the directory", code: ENOTDIR)
            case ENOENT:
                guard let mode else { return nil }
                if mkdirat(parent.descriptor, name, mode) != 0 {
                    if errno == EEXIST { continue }
                    throw FileWriteError(path: path, operation: "create the directory", code: errno)
                }
                return try ownNewDirectory(name, in: parent, mode: mode)
            case let code:
                throw FileWriteError(path: path, operation: "open", code: code)
            }
        }
        throw FileWriteError(path: path, operation: "create the directory", code: EAGAIN, reason: "it keeps appearing and disappearing")
    }

    /// The directory just made: opened without following a link, checked to be this
    /// process's, then given `mode` (mkdir applies the umask) through its descriptor.
    private static func ownNewDirectory(_ name: String, in parent: WritableDirectory, mode: mode_t) throws(FileWriteError) -> WritableDirectory {
        let path = parent.child(name)
        let descriptor = openat(parent.descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw FileWriteError(path: path, operation: "create the directory", code: errno,
                                 reason: "it was replaced as it was made (\(String(cString: strerror(errno))))")
        }
        let directory = WritableDirectory(path: path, descriptor: descriptor)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw FileWriteError(path: path, operation: "create the directory", code: errno) }
        guard status.st_uid == geteuid() else {
            throw FileWriteError(path: path, operation: "create the directory", code: EPERM, reason: "it was replaced by another user's as it was made")
        }
        guard fchmod(descriptor, mode) == 0 else { throw FileWriteError(path: path, operation: "create the directory", code: errno) }
        return directory
    }

    /// A symbolic link in place of a directory: followed only when the link and the
    /// directory holding it are this user's or root's, and nobody else may write there.
    private static func followLink(_ name: String, in parent: WritableDirectory) throws(FileWriteError) -> WritableDirectory {
        let path = parent.child(name)
        var link = stat()
        var holder = stat()
        guard fstatat(parent.descriptor, name, &link, AT_SYMLINK_NOFOLLOW) == 0, fstat(parent.descriptor, &holder) == 0 else {
            throw FileWriteError(path: path, operation: "look up", code: errno)
        }
        let trusted = { (uid: uid_t) in uid == 0 || uid == geteuid() }
        // In a sticky directory (/tmp) others may add entries but not replace this one.
        let othersMayReplace = holder.st_mode & 0o022 != 0 && holder.st_mode & S_ISVTX == 0
        guard trusted(link.st_uid), trusted(holder.st_uid), !othersMayReplace else {
            throw FileWriteError(path: path, operation: "follow", code: EPERM,
                                 reason: "it is a symbolic link in a directory that another user owns or may write, which devtrust does not follow")
        }
        let descriptor = openat(parent.descriptor, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileWriteError(path: path, operation: "open", code: errno) }
        return WritableDirectory(path: path, descriptor: descriptor)
    }

    /// Replaces `name` in `directory` with `bytes` in one step (a temporary file beside
    /// it, renamed over it), mode `mode`. A symbolic link there is replaced, not followed.
    public static func writeAtomically(_ name: String, in directory: WritableDirectory, _ bytes: [UInt8], mode: mode_t) throws(FileWriteError) {
        let path = directory.child(name)
        let temporary = name + ".tmp-\(getpid())"
        let file = openat(directory.descriptor, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
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
        if failure == nil && renameat(directory.descriptor, temporary, directory.descriptor, name) != 0 {
            failure = FileWriteError(path: path, operation: "replace", code: errno)
        }
        if let failure {
            unlinkat(directory.descriptor, temporary, 0)
            throw failure
        }
    }

    /// Removes the file `name` from `directory`; a file that is not there is no error.
    public static func remove(_ name: String, in directory: WritableDirectory) throws(FileWriteError) {
        guard unlinkat(directory.descriptor, name, 0) == 0 || errno == ENOENT else {
            throw FileWriteError(path: directory.child(name), operation: "remove", code: errno)
        }
    }

    /// Removes the directory `name` from `directory` if it is empty (never a link); whether it did.
    @discardableResult
    public static func removeIfEmpty(_ name: String, in directory: WritableDirectory) -> Bool {
        unlinkat(directory.descriptor, name, AT_REMOVEDIR) == 0
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

extension FileWriteError: ClassifiedError {
    /// A file devtrust writes (a cache, a record) cannot be written. A failure (exit 1), in its own words.
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
}
