import Glibc

/// Where devtrust keeps what it can work out again (the slow posture collectors'
/// results, the last clock measurements): `$XDG_CACHE_HOME/devtrust`
/// (`~/.cache/devtrust`; `/var/cache/devtrust` for root without XDG_CACHE_HOME). Not the keystore:
/// that holds keys and registrations under a lock, and a command that only
/// reads the key (`token`, `pubkey`, `attributes`) leaves it byte for byte as
/// it was. The same trust checks apply: the directory is the user's with no
/// group or other access, files are private, symlinks are not followed (the
/// directory itself may not be one), and a cache that is the keystore or lies
/// inside it is not used.
/// A cache that cannot be read or written is no error: it is worked out again.
public struct CacheDirectory: Sendable {
    public static let systemDirectory = "/var/cache/devtrust"

    public let path: String
    public let ownerID: UInt32
    /// The keystore, which the cache must stay out of.
    public let keystorePath: String?
    /// Whether the cache is the keystore or inside it: worked out once (a few
    /// `realpath` calls), not on every read and write of a command.
    let overlapsKeystore: Bool

    public init(path: String, ownerID: UInt32, keystorePath: String? = nil) {
        self.path = path
        self.ownerID = ownerID
        self.keystorePath = keystorePath
        self.overlapsKeystore = Self.overlaps(cache: path, keystore: keystorePath)
    }

    /// `$XDG_CACHE_HOME/devtrust` when it is set (and absolute), then `/var/cache/devtrust`
    /// for root, then `$HOME/.cache/devtrust`.
    public static func resolve(environment: [String: String], effectiveUserID: UInt32, keystorePath: String? = nil) -> CacheDirectory? {
        if let cacheHome = environment["XDG_CACHE_HOME"], cacheHome.hasPrefix("/") {
            return CacheDirectory(path: cacheHome + "/devtrust", ownerID: effectiveUserID, keystorePath: keystorePath)
        }
        if effectiveUserID == 0 { return CacheDirectory(path: systemDirectory, ownerID: 0, keystorePath: keystorePath) }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return CacheDirectory(path: home + "/.cache/devtrust", ownerID: effectiveUserID, keystorePath: keystorePath)
        }
        return nil
    }

    /// Whether the cache is the keystore or inside it, once symlinks above it are resolved.
    static func overlaps(cache path: String, keystore keystorePath: String?) -> Bool {
        guard let keystorePath, let keystore = canonical(keystorePath) else { return false }
        var components = [String]()
        var existing = path
        var base = canonical(existing)
        while base == nil, let slash = existing.lastIndex(of: "/"), slash != existing.startIndex {
            components.insert(String(existing[existing.index(after: slash)...]), at: 0)
            existing = String(existing[..<slash])
            base = canonical(existing)
        }
        guard let base else { return false }
        let cache = ([base] + components).joined(separator: "/")
        return cache == keystore || cache.hasPrefix(keystore + "/")
    }

    /// `path` resolved (links, `.`, `..`, trailing slashes), or nil when it does not resolve.
    public static func canonical(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The file's bytes; nil when it is missing, or the directory or file is not trusted.
    public func read(_ name: String) -> [UInt8]? {
        guard KeystoreFormat.isPlainFileName(name), !overlapsKeystore,
              let directory = try? PrivateDirectory.open(path, ownerID: ownerID, followingSymlink: false) else { return nil }
        return (try? directory.read(name, requirePrivate: true)) ?? nil
    }

    /// Replaces the file atomically, creating the directory (0700) when it is missing.
    public func write(_ name: String, _ bytes: [UInt8]) {
        guard KeystoreFormat.isPlainFileName(name), !overlapsKeystore,
              let directory = try? PrivateDirectory.openOrCreate(path, ownerID: ownerID, followingSymlink: false) else { return }
        try? directory.writeAtomically(name, bytes)
    }
}
