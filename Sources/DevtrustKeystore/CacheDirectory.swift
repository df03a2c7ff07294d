/// Where devtrust keeps what it can work out again (the slow posture collectors'
/// results, the last clock measurements): `$XDG_CACHE_HOME/devtrust`
/// (`~/.cache/devtrust`; `/var/cache/devtrust` for root without XDG_CACHE_HOME). Not the keystore:
/// that holds keys and registrations under a lock, and a command that only
/// reads the key (`token`, `pubkey`, `attributes`) leaves it byte for byte as
/// it was. The same trust checks apply: the directory is the user's with no
/// group or other access, files are private, symlinks are not followed.
/// A cache that cannot be read or written is no error: it is worked out again.
public struct CacheDirectory: Sendable {
    public static let systemDirectory = "/var/cache/devtrust"

    public let path: String
    public let ownerID: UInt32

    public init(path: String, ownerID: UInt32) {
        self.path = path
        self.ownerID = ownerID
    }

    /// `$XDG_CACHE_HOME/devtrust` when it is set (and absolute), then `/var/cache/devtrust`
    /// for root, then `$HOME/.cache/devtrust`.
    public static func resolve(environment: [String: String], effectiveUserID: UInt32) -> CacheDirectory? {
        if let cacheHome = environment["XDG_CACHE_HOME"], cacheHome.hasPrefix("/") {
            return CacheDirectory(path: cacheHome + "/devtrust", ownerID: effectiveUserID)
        }
        if effectiveUserID == 0 { return CacheDirectory(path: systemDirectory, ownerID: 0) }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return CacheDirectory(path: home + "/.cache/devtrust", ownerID: effectiveUserID)
        }
        return nil
    }

    /// The file's bytes; nil when it is missing, or the directory or file is not trusted.
    public func read(_ name: String) -> [UInt8]? {
        guard KeystoreFormat.isPlainFileName(name), let directory = try? PrivateDirectory.open(path, ownerID: ownerID) else { return nil }
        return (try? directory.read(name, requirePrivate: true)) ?? nil
    }

    /// Replaces the file atomically, creating the directory (0700) when it is missing.
    public func write(_ name: String, _ bytes: [UInt8]) {
        guard KeystoreFormat.isPlainFileName(name), let directory = try? PrivateDirectory.openOrCreate(path, ownerID: ownerID) else { return }
        try? directory.writeAtomically(name, bytes)
    }
}
