import DevtrustEncoding
import Glibc

/// What a reader got: the manifest and, when there is a key, its file's bytes,
/// both from the same committed state.
public struct KeystoreSnapshot: Sendable {
    public let state: KeystoreState
    /// The key file's contents. For a software key this is secret: zeroize it after use.
    public var keyFile: [UInt8]?
}

/// Files the body of `Keystore.update` writes before the manifest commits them.
public final class KeystoreStaging {
    fileprivate let directory: PrivateDirectory
    fileprivate var writtenFiles: [String] = []

    fileprivate init(directory: PrivateDirectory) {
        self.directory = directory
    }

    /// Writes a key file atomically. It becomes part of the keystore only if
    /// the manifest that `update` writes next names it; otherwise it is removed.
    public func writeKeyFile(named name: String, contents: [UInt8]) throws(KeystoreError) {
        try writeOwnedFile(named: name, contents: contents)
    }

    /// Writes a sign-in's token file (secret), on the same terms as a key file.
    public func writeSignInFile(named name: String, contents: [UInt8]) throws(KeystoreError) {
        try writeOwnedFile(named: name, contents: contents)
    }

    private func writeOwnedFile(named name: String, contents: [UInt8]) throws(KeystoreError) {
        precondition(KeystoreFormat.isPlainFileName(name) && Keystore.ownedPrefixes.contains { name.hasPrefix($0) })
        try directory.writeAtomically(name, contents)
        writtenFiles.append(name)
    }

    /// Reads a file the committed manifest names (a sign-in's tokens); nil when missing.
    public func read(_ name: String) throws(KeystoreError) -> [UInt8]? {
        try directory.read(name, requirePrivate: true)
    }

    public var directoryPath: String { directory.path }
}

/// The keystore directory (see keystore/README.md).
///
/// Writers take an exclusive lock, write new files under new names, then
/// commit by atomically replacing `keystore.json`; files no longer named are
/// deleted afterwards. A crash at any point leaves the old state or the new
/// one. Readers take no lock.
public struct Keystore: Sendable {
    static let keyFilePrefix = "key-"
    static let signInFilePrefix = "signin-"
    /// Files devtrust owns: the ones the manifest does not name are deleted.
    static let ownedPrefixes = [keyFilePrefix, signInFilePrefix]

    /// The largest keystore.json a keystore reads (any of its files, in fact: `PrivateDirectory`);
    /// `update` writes no larger one (it would lock everyone out of the keystore).
    public static let maximumManifestBytes = PrivateDirectory.maximumFileSize

    public let path: String
    public let ownerID: UInt32
    public var lockTimeoutMilliseconds: Int

    public init(path: String, ownerID: UInt32 = geteuid(), lockTimeoutMilliseconds: Int = 10_000) {
        self.path = path
        self.ownerID = ownerID
        self.lockTimeoutMilliseconds = lockTimeoutMilliseconds
    }

    public var manifestPath: String { path.hasSuffix("/") ? path + KeystoreFormat.manifestName : path + "/" + KeystoreFormat.manifestName }

    /// The committed state, or nil when there is no keystore yet.
    public func load() throws(KeystoreError) -> KeystoreState? {
        guard let directory = try PrivateDirectory.open(path, ownerID: ownerID) else { return nil }
        return try Self.readState(in: directory)
    }

    /// The committed state with the key file it names. If a writer replaces
    /// the key between the two reads, the read starts over.
    public func loadWithKey() throws(KeystoreError) -> KeystoreSnapshot? {
        guard let directory = try PrivateDirectory.open(path, ownerID: ownerID) else { return nil }
        var attempts = 0
        while true {
            guard let state = try Self.readState(in: directory) else { return nil }
            guard let key = state.key else { return KeystoreSnapshot(state: state, keyFile: nil) }
            if let contents = try directory.read(key.file, requirePrivate: true) {
                return KeystoreSnapshot(state: state, keyFile: contents)
            }
            attempts += 1
            if attempts >= 3 { throw .keyFileMissing(path: directory.pathOf(key.file)) }
        }
    }

    /// A file the manifest names (a sign-in's tokens), read without the lock: nil when missing.
    public func readOwnedFile(_ name: String) throws(KeystoreError) -> [UInt8]? {
        guard KeystoreFormat.isPlainFileName(name), let directory = try PrivateDirectory.open(path, ownerID: ownerID) else { return nil }
        return try directory.read(name, requirePrivate: true)
    }

    /// A file of the keystore outside the manifest (a cache): nil when absent.
    public func readAuxiliary(_ name: String) -> [UInt8]? {
        guard Self.isAuxiliaryName(name), let directory = try? PrivateDirectory.open(path, ownerID: ownerID) else { return nil }
        return (try? directory.read(name, requirePrivate: true)) ?? nil
    }

    /// Replaces an auxiliary file atomically, without the lock: it holds
    /// nothing another file depends on. Does nothing if there is no keystore.
    public func writeAuxiliary(_ name: String, _ bytes: [UInt8]) {
        guard Self.isAuxiliaryName(name), let directory = try? PrivateDirectory.open(path, ownerID: ownerID) else { return }
        try? directory.writeAtomically(name, bytes)
    }

    static func isAuxiliaryName(_ name: String) -> Bool {
        KeystoreFormat.isPlainFileName(name) && !ownedPrefixes.contains { name.hasPrefix($0) } && name != KeystoreFormat.manifestName
    }

    /// Runs `body` on the current state under the lock, then commits the new
    /// state. If `body` throws, nothing changes and the files it staged are removed.
    @discardableResult
    public func update<Result>(_ body: (inout KeystoreState, KeystoreStaging) throws -> Result) throws -> Result {
        let directory = try PrivateDirectory.openOrCreate(path, ownerID: ownerID)
        let lock = try KeystoreLock(in: directory, timeoutMilliseconds: lockTimeoutMilliseconds)
        defer { withExtendedLifetime(lock) {} }

        try removeLeftoverTemporaryFiles(in: directory)
        let before = try Self.readState(in: directory) ?? .empty
        var state = before
        let staging = KeystoreStaging(directory: directory)
        let result: Result
        do {
            result = try body(&state, staging)
            if state != before || !staging.writtenFiles.isEmpty {
                let manifest = KeystoreFormat.encode(state)
                // Larger than a keystore reads, it would make the keystore unreadable to everyone, for good: the old one stays.
                guard manifest.count <= Self.maximumManifestBytes else {
                    throw KeystoreError.stateTooLarge(path: directory.pathOf(KeystoreFormat.manifestName), bytes: manifest.count, limit: Self.maximumManifestBytes)
                }
                try directory.writeAtomically(KeystoreFormat.manifestName, manifest)
            }
        } catch {
            // Whatever got committed keeps its key file; other staged files go
            // (if even the manifest cannot be read, the next writer cleans up).
            if let committed = try? Self.readState(in: directory) ?? .empty {
                let kept = Set([committed.key?.file].compactMap { $0 } + committed.signIns.map(\.file))
                for name in staging.writtenFiles where !kept.contains(name) {
                    try? directory.remove(name)
                }
            }
            throw error
        }
        try removeUnreferencedFiles(in: directory, keeping: Set([state.key?.file].compactMap { $0} + state.signIns.map(\.file)))
        return result
    }

    /// Whether the manifest is damaged (unreadable as any keystore version):
    /// what `reset` may move aside. Unsafe permissions, a lock or a newer
    /// version are not damage; they are reported as they are.
    public static func isDamage(_ error: KeystoreError) -> Bool {
        if case .corrupt = error { return true }
        return false
    }

    /// Moves the whole keystore directory aside, under the lock, to a sibling
    /// named `<path>.damaged-<stamp>` (mode 0700), and returns that path. The
    /// next writer starts a new keystore at `path`.
    public func moveAside(stamp: String) throws(KeystoreError) -> String {
        guard let directory = try PrivateDirectory.open(path, ownerID: ownerID) else {
            throw .io(path: path, operation: "move aside", errno: ENOENT)
        }
        let lock = try KeystoreLock(in: directory, timeoutMilliseconds: lockTimeoutMilliseconds)
        defer { withExtendedLifetime(lock) {} }
        var named = path
        while named.count > 1 && named.hasSuffix("/") { named.removeLast() }
        // The directory itself, not a link to it, and its name without "." or "..": renaming a link
        // would leave the data where it was, and a target spelt through "ks/.." no longer resolves
        // once "ks" has moved.
        var status = stat()
        let isLink = lstat(named, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK
        guard let resolved = realpath(named, nil) else { throw .io(path: named, operation: "resolve", errno: errno) }
        let base = String(cString: resolved)
        free(resolved)
        var target = base + ".damaged-" + stamp
        var number = 2
        while access(target, F_OK) == 0 {
            target = base + ".damaged-" + stamp + "-\(number)"
            number += 1
        }
        guard rename(base, target) == 0 else { throw .io(path: base, operation: "move aside to \(target)", errno: errno) }
        guard chmod(target, 0o700) == 0 else { throw .io(path: target, operation: "chmod 700", errno: errno) }
        // The link stays usable: an empty private directory where it points (best effort; the data has moved).
        if isLink { _ = mkdir(base, 0o700) }
        return target
    }

    private static func readState(in directory: PrivateDirectory) throws(KeystoreError) -> KeystoreState? {
        guard let bytes = try directory.read(KeystoreFormat.manifestName, requirePrivate: false) else { return nil }
        return try KeystoreFormat.decode(bytes, path: directory.pathOf(KeystoreFormat.manifestName))
    }

    /// Temp files of a writer that crashed before its rename.
    private func removeLeftoverTemporaryFiles(in directory: PrivateDirectory) throws(KeystoreError) {
        for name in try directory.entries() where name.hasPrefix(PrivateDirectory.temporaryPrefix) {
            try directory.remove(name)
        }
    }

    /// Key and token files no longer named, and those of a writer that crashed before its commit.
    private func removeUnreferencedFiles(in directory: PrivateDirectory, keeping current: Set<String>) throws(KeystoreError) {
        var removed = false
        for name in try directory.entries() where Self.ownedPrefixes.contains(where: { name.hasPrefix($0) }) && !current.contains(name) {
            try directory.remove(name)
            removed = true
        }
        if removed { try directory.sync() }
    }
}
