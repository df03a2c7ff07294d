import Glibc

/// Whether a file that tells devtrust what to run or where to send
/// credentials (the configuration, a collector program) can be changed by
/// someone other than the user running devtrust or root: as ssh refuses a
/// group- or world-writable ~/.ssh/config.
public enum FileTrust {
    /// Why `status` cannot be trusted, or nil when it can.
    public static func problem(_ status: stat, effectiveUser: uid_t = geteuid()) -> String? {
        if status.st_uid != 0 && status.st_uid != effectiveUser {
            return "is owned by uid \(status.st_uid), neither you (uid \(effectiveUser)) nor root"
        }
        if status.st_mode & 0o022 != 0 {
            return "is writable by \(status.st_mode & 0o002 != 0 ? "anyone" : "its group") (mode \(String(status.st_mode & 0o7777, radix: 8)))"
        }
        return nil
    }

    /// The same for a path and the directory holding it (a directory others
    /// can write to, without the sticky bit, lets them replace the file). A
    /// file that is not there is no problem here: running it says so.
    public static func problem(path: String, effectiveUser: uid_t = geteuid()) -> String? {
        // The directory first: when only trusted users can write to it, nobody
        // else can put a file there between this check and its use either.
        if let problem = directoryProblem(path: path) { return problem }
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return problem(status, effectiveUser: effectiveUser)
    }
}

extension FileTrust {
    /// Why the directory holding `path` lets others replace it (writable by others, without the
    /// sticky bit), or nil; nil too when the directory is not there.
    public static func directoryProblem(path: String) -> String? {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        var parent = stat()
        if stat(directory, &parent) == 0, parent.st_mode & 0o022 != 0, parent.st_mode & UInt32(S_ISVTX) == 0 {
            return "is in \(directory), which others can write to (mode \(String(parent.st_mode & 0o7777, radix: 8)))"
        }
        return nil
    }
}

extension FileReader {
    /// Reads a file and checks, on the same open file, that only its owner
    /// (the user or root) can change it: `FileTrust.problem`.
    public static func readTrusted(_ path: String, limit: Int = 1 << 20) throws(FileReadError) -> (bytes: [UInt8], trustProblem: String?) {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0 else { throw FileReadError(path: path, code: errno, limit: limit) }
        if let problem = FileTrust.problem(status) { return ([], problem) }
        return (try read(descriptor: file, path: path, limit: limit), nil)
    }
}
