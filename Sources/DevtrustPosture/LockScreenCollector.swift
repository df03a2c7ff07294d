import DevtrustSystem
import Glibc

/// `lockScreen` from GNOME's settings, read from the dconf databases without
/// spawning gsettings: locked when `lock-enabled` is on and `idle-delay` is
/// not 0 (never idle). The user's database wins over the system `local`
/// database, which wins over GNOME's defaults (lock on, 300 s).
enum LockScreenCollector {
    static let lockEnabledKey = "/org/gnome/desktop/screensaver/lock-enabled"
    static let idleDelayKey = "/org/gnome/desktop/session/idle-delay"
    /// dconf's databases are a few kilobytes; a larger one is not read (nor held in memory).
    static let maximumDatabaseBytes = 2 << 20

    static func collect(_ input: PostureInput) -> Attribute {
        guard FileReader.exists(input.path("/usr/bin/gnome-shell")) else {
            return .absent("lockScreen", "no desktop devtrust can read (gnome-shell is not installed): a headless machine or another desktop")
        }
        var databases = [(String, GVDBFile)]()
        let configHome = input.xdgConfigHome.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? input.home.map { $0 + "/.config" }
        let userDatabase = configHome.map { $0 + "/dconf/user" }
        for path in [userDatabase, "/etc/dconf/db/local"].compactMap({ $0 }) {
            let bytes: [UInt8]
            do throws(FileReadError) {
                // A regular file only: the user's database is theirs to replace, with a FIFO that would hold
                // the reader (the system agent reads it for every user) or a device. The agent reads it as
                // its user (a link to another user's database, or to root's files, is not read).
                if path == userDatabase, let owner = input.homeOwner {
                    bytes = try FileReader.readRegularFile(input.path(path), limit: maximumDatabaseBytes, asUser: owner)
                } else {
                    bytes = try FileReader.readRegularFile(input.path(path), limit: maximumDatabaseBytes)
                }
            } catch {
                // dconf reads no database it cannot open, and neither does devtrust. One it would read
                // and devtrust does not (too large, not the user's) leaves the claim unknown, not GNOME's default.
                if error.isMissing || error.code == EINVAL { continue }
                return .absent("lockScreen", "\(path): \(error.reason)")
            }
            guard let database = GVDBFile(bytes) else {
                return .absent("lockScreen", "\(path) is not a dconf database devtrust can read")
            }
            databases.append((path, database))
        }
        func setting(_ key: String) -> (GVDBFile.Value, String)? {
            for (path, database) in databases {
                if let value = database.value(key) { return (value, path) }
            }
            return nil
        }
        var lockEnabled = true
        var idleDelay: UInt32 = 300
        var sources = [String]()
        if let (value, path) = setting(lockEnabledKey) {
            guard case let .bool(flag) = value else { return .absent("lockScreen", "\(lockEnabledKey) in \(path) is not a boolean") }
            lockEnabled = flag
            sources.append("lock-enabled=\(flag) in \(path)")
        } else {
            sources.append("lock-enabled=true (GNOME default)")
        }
        if let (value, path) = setting(idleDelayKey) {
            guard case let .uint32(seconds) = value else { return .absent("lockScreen", "\(idleDelayKey) in \(path) is not a uint32") }
            idleDelay = seconds
            sources.append("idle-delay=\(seconds) in \(path)")
        } else {
            sources.append("idle-delay=300 (GNOME default)")
        }
        let locked = lockEnabled && idleDelay > 0
        return Attribute(name: "lockScreen", value: locked ? "true" : "false", source: "GNOME: " + sources.joined(separator: ", "))
    }
}
