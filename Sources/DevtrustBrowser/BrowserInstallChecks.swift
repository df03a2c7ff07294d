import Glibc

/// What `browser install` checks before it names a binary in a host manifest,
/// or writes into a user's directories.
package struct BrowserInstallChecks {
    /// Who runs the install.
    package let effectiveUserID: uid_t
    package let effectiveGroupID: gid_t

    package static var current: BrowserInstallChecks { BrowserInstallChecks(effectiveUserID: geteuid(), effectiveGroupID: getegid()) }

    /// Why the host binary at `hostPath` must not go into a manifest of `scope`, or nil.
    /// The browsers run it as every user (system-wide) or as this user: the binary and
    /// each directory above it must be root's (or, for this user's own manifests, this
    /// user's), and no one else may write them; a root-owned sticky directory (/tmp)
    /// is fine, as others cannot replace what it holds.
    package func hostProblem(_ hostPath: String, scope: NativeHostManifest.Scope) -> String? {
        var path = hostPath
        while true {
            var status = stat()
            guard lstat(path, &status) == 0 else { return "\(path) cannot be examined (\(String(cString: strerror(errno))))" }
            let owner = status.st_uid
            let isOwnerTrusted = owner == 0 || (scope == .user && owner == effectiveUserID)
            guard isOwnerTrusted else {
                return "\(path) belongs to uid \(owner), " + (scope == .system ? "not root" : "neither you nor root") + ", who could replace the binary"
            }
            let isDirectory = status.st_mode & S_IFMT == S_IFDIR
            let isStickyRootDirectory = isDirectory && owner == 0 && status.st_mode & S_ISVTX != 0
            // This user's own group (a user private group) may write this user's files.
            let groupMayWrite = status.st_mode & 0o020 != 0 && !(scope == .user && owner == effectiveUserID && status.st_gid == effectiveGroupID)
            if !isStickyRootDirectory && (status.st_mode & 0o002 != 0 || groupMayWrite) {
                return "\(path) may be written by " + (status.st_mode & 0o002 != 0 ? "every user" : "group \(status.st_gid)") + ", who could replace the binary"
            }
            guard path != "/" else { return nil }
            path = Self.parent(of: path)
        }
    }

    /// For root installing a user's manifests: the owner of the nearest existing
    /// directory on the way to `directory` when it is not root (another user's home).
    package func foreignOwner(of directory: String) -> (path: String, owner: uid_t)? {
        guard effectiveUserID == 0 else { return nil }
        var path = directory
        while true {
            var status = stat()
            if stat(path, &status) == 0 { return status.st_uid == 0 ? nil : (path, status.st_uid) }
            guard path != "/" else { return nil }
            path = Self.parent(of: path)
        }
    }

    package static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
