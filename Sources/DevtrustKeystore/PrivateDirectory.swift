import DevtrustEncoding
import DevtrustSystem
import Glibc

/// An open directory that only its owner may use, and the file operations the
/// keystore needs inside it: reads that refuse symlinks and exposed files,
/// and atomic replacement (temp file, fsync, rename, fsync of the directory).
///
/// All operations are relative to the directory's descriptor, so a rename of
/// the path underneath cannot redirect them.
final class PrivateDirectory {
    static let temporaryPrefix = ".tmp-"
    static let maximumFileSize = 1 << 20

    let path: String
    let descriptor: Int32
    let ownerID: UInt32

    private init(path: String, descriptor: Int32, ownerID: UInt32) {
        self.path = path
        self.descriptor = descriptor
        self.ownerID = ownerID
    }

    deinit {
        close(descriptor)
    }

    /// Opens an existing directory and checks it belongs to `ownerID` and has
    /// no group or other access; nil when it does not exist.
    /// - Parameter followingSymlink: false refuses a symlink in place of the directory (ELOOP).
    static func open(_ path: String, ownerID: UInt32, followingSymlink: Bool = true) throws(KeystoreError) -> PrivateDirectory? {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followingSymlink ? 0 : O_NOFOLLOW))
        if descriptor < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ENOTDIR { throw .notDirectory(path: path) }
            throw .io(path: path, operation: "open the keystore directory", errno: code)
        }
        let directory = PrivateDirectory(path: path, descriptor: descriptor, ownerID: ownerID)
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .io(path: path, operation: "stat", errno: errno) }
        try checkPrivate(info, path: path, ownerID: ownerID, fix: "chmod 700 \(shellQuoted(path))")
        return directory
    }

    /// Opens the directory, creating it and any missing parents with mode 0700.
    static func openOrCreate(_ path: String, ownerID: UInt32, followingSymlink: Bool = true) throws(KeystoreError) -> PrivateDirectory {
        if let existing = try open(path, ownerID: ownerID, followingSymlink: followingSymlink) { return existing }
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw .io(path: prefix, operation: "create directory", errno: errno)
            }
        }
        guard let created = try open(path, ownerID: ownerID, followingSymlink: followingSymlink) else {
            throw .io(path: path, operation: "open the keystore directory", errno: ENOENT)
        }
        return created
    }

    /// `fix` is made only for a refusal: quoting the path for a shell looks up
    /// Unicode properties, which every token would pay for.
    static func checkPrivate(_ info: stat, path: String, ownerID: UInt32, fix: @autoclosure () -> String) throws(KeystoreError) {
        guard info.st_uid == ownerID else { throw .wrongOwner(path: path, owner: info.st_uid, expected: ownerID) }
        guard info.st_mode & 0o077 == 0 else { throw .unsafePermissions(path: path, mode: info.st_mode, fix: fix()) }
    }

    func pathOf(_ name: String) -> String {
        path.hasSuffix("/") ? path + name : path + "/" + name
    }

    /// Reads a regular file in this directory without following symlinks;
    /// nil when it does not exist. With `requirePrivate`, the file must be
    /// the owner's and have no group or other access (as ssh requires of keys).
    func read(_ name: String, requirePrivate: Bool) throws(KeystoreError) -> [UInt8]? {
        let filePath = pathOf(name)
        let file = openat(descriptor, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if file < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP { throw .notRegularFile(path: filePath) }
            throw .io(path: filePath, operation: "open", errno: code)
        }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0 else { throw .io(path: filePath, operation: "stat", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .notRegularFile(path: filePath) }
        if requirePrivate {
            try Self.checkPrivate(info, path: filePath, ownerID: ownerID, fix: "chmod 600 \(shellQuoted(filePath))")
        }
        guard info.st_size <= Self.maximumFileSize else {
            throw .corrupt(path: filePath, detail: "the file is \(info.st_size) bytes, larger than any keystore file")
        }
        var contents = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while filled < contents.count {
            let count = contents.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(path: filePath, operation: "read", errno: errno)
            }
            if count == 0 { break }
            filled += count
        }
        // In place: a key file leaves no shorter copy behind.
        contents.removeLast(contents.count - filled)
        return contents
    }

    /// Replaces `name` with `bytes` (mode 0600) so that a reader or a crash sees
    /// either the old file or the new one, never a mix.
    func writeAtomically(_ name: String, _ bytes: [UInt8]) throws(KeystoreError) {
        let temporaryName = "\(Self.temporaryPrefix)\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let temporaryPath = pathOf(temporaryName)
        let file = openat(descriptor, temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw .io(path: temporaryPath, operation: "create", errno: errno) }
        var committed = false
        defer {
            if !committed { unlinkat(descriptor, temporaryName, 0) }
        }
        do {
            defer { close(file) }
            var written = 0
            while written < bytes.count {
                let count = bytes.withUnsafeBytes { Glibc.write(file, $0.baseAddress! + written, $0.count - written) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw KeystoreError.io(path: temporaryPath, operation: "write", errno: errno)
                }
                written += count
            }
            guard fsync(file) == 0 else { throw KeystoreError.io(path: temporaryPath, operation: "fsync", errno: errno) }
        }
        guard renameat(descriptor, temporaryName, descriptor, name) == 0 else {
            throw .io(path: pathOf(name), operation: "rename \(temporaryName) to", errno: errno)
        }
        committed = true
        try sync()
    }

    func remove(_ name: String) throws(KeystoreError) {
        if unlinkat(descriptor, name, 0) != 0 && errno != ENOENT {
            throw .io(path: pathOf(name), operation: "delete", errno: errno)
        }
    }

    func sync() throws(KeystoreError) {
        guard fsync(descriptor) == 0 else { throw .io(path: path, operation: "fsync", errno: errno) }
    }

    /// The names in the directory, without `.` and `..`.
    func entries() throws(KeystoreError) -> [String] {
        let copy = dup(descriptor)
        guard copy >= 0, let stream = fdopendir(copy) else {
            throw .io(path: path, operation: "list", errno: errno)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names = [String]()
        while let entry = readdir(stream) {
            let name = DirectoryListing.entryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
