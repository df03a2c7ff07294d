import DevtrustKeystore
import Glibc

/// What the agent knows of a local user: whether they have an account (only root and users with
/// one are served), their home (where the desktop's lock-screen settings are) and their groups
/// (what the policy allows by), from the system's user and group databases. Looked up by the uid
/// the kernel gave, and kept a short while: a lookup can be slow (LDAP, sssd).
final class AgentUsers {
    struct User {
        /// Why the uid has no account the agent knows of (none in the user database, or the database
        /// did not answer); nil: it has one.
        let withoutAccount: String?
        /// The account's name as registrations record it (`AccountName`): whose they are, when a uid
        /// is given to a new account after `userdel`.
        let account: String?
        let home: String?
        /// The account's primary and supplementary gids.
        let groups: [UInt32]
        let fetchedAt: Int64
    }

    static let keptMilliseconds: Int64 = 30_000
    /// The local databases' files: when either changes (`useradd`, `userdel`, `usermod -aG`), every
    /// user is looked up again, so that a uid given to a new account is never taken for the departed
    /// one's, and a group change counts at once. One `stat` each a request; a directory service (LDAP,
    /// sssd) changes none of them and is asked again after `keptMilliseconds`.
    static let databaseFiles = ["/etc/passwd", "/etc/group"]
    private var users = [UInt32: User]()
    private var databases = [FileVersion?]()

    /// What says a file changed: its inode, size, and modification and change times.
    struct FileVersion: Equatable {
        let inode: UInt64, size: Int64, modified: timespec, changed: timespec

        static func == (left: FileVersion, right: FileVersion) -> Bool {
            left.inode == right.inode && left.size == right.size && left.modified.tv_sec == right.modified.tv_sec
                && left.modified.tv_nsec == right.modified.tv_nsec && left.changed.tv_sec == right.changed.tv_sec
                && left.changed.tv_nsec == right.changed.tv_nsec
        }

        static func of(_ path: String) -> FileVersion? {
            var status = stat()
            guard stat(path, &status) == 0 else { return nil }
            return FileVersion(inode: UInt64(status.st_ino), size: Int64(status.st_size), modified: status.st_mtim, changed: status.st_ctim)
        }
    }

    func user(_ uid: UInt32, now: Int64) -> User {
        let current = Self.databaseFiles.map(FileVersion.of)
        if current != databases {
            users.removeAll()
            databases = current
        }
        if let known = users[uid], now - known.fetchedAt < Self.keptMilliseconds { return known }
        if users.count > 4096 { users.removeAll() }
        let (user, answered) = Self.lookUp(uid, now: now)
        // A database that did not answer is asked again next time (LDAP may be back).
        if answered { users[uid] = user }
        return user
    }

    /// The user, and whether the database answered (with an entry or without).
    private static func lookUp(_ uid: UInt32, now: Int64) -> (User, answered: Bool) {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let code = getpwuid_r(uid, &entry, &buffer, buffer.count, &result)
        // getpwuid_r(3): no entry is 0 (or ENOENT, ESRCH, EBADF, EPERM with some databases) and no result.
        if result == nil {
            let missing = [0, ENOENT, ESRCH, EBADF, EPERM].contains(code)
            let why = missing ? "uid \(uid) has none (no entry in the user database)"
                : "the user database did not answer for uid \(uid) (\(String(cString: strerror(code))))"
            return (User(withoutAccount: why, account: nil, home: nil, groups: [], fetchedAt: now), missing)
        }
        let home = entry.pw_dir.map { String(cString: $0) }.flatMap { $0.hasPrefix("/") ? $0 : nil }
        var groups = [gid_t](repeating: 0, count: 256)
        var count = Int32(groups.count)
        if getgrouplist(entry.pw_name, entry.pw_gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(entry.pw_name, entry.pw_gid, &groups, &count) < 0 { count = 0 }
        }
        let account = entry.pw_name.map { AccountName.recorded(String(cString: $0)) }
        return (User(withoutAccount: nil, account: account, home: home, groups: [entry.pw_gid] + groups.prefix(Int(max(0, count))), fetchedAt: now), true)
    }
}

/// Requests per uid, as a token bucket: `burst` at once, then `perSecond`.
final class AgentRateLimiter {
    private let burst: Double
    private let perSecond: Double
    private var buckets = [UInt32: (tokens: Double, at: Int64)]()

    init(burst: Int, perSecond: Int) {
        self.burst = Double(burst)
        self.perSecond = Double(perSecond)
    }

    /// Whether `uid` may make a request at `now` (milliseconds), taking one if so.
    func take(_ uid: UInt32, now: Int64) -> Bool {
        var bucket = buckets[uid] ?? (burst, now)
        bucket.tokens = min(burst, bucket.tokens + Double(now - bucket.at) / 1000 * perSecond)
        bucket.at = now
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        buckets[uid] = bucket
        return allowed
    }
}
