import Glibc

/// Anything wrong with the keystore on disk. Every case names the path and
/// says what to do; all are keystore failures (the CLI's ErrorReport chooses the exit code).
public enum KeystoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsafePermissions(path: String, mode: UInt32, fix: String)
    case wrongOwner(path: String, owner: UInt32, expected: UInt32)
    case notRegularFile(path: String)
    case notDirectory(path: String)
    case corrupt(path: String, detail: String)
    case unsupportedVersion(path: String, found: Int64, supported: Int64)
    case locked(path: String, waitedSeconds: Int)
    case keyFileMissing(path: String)
    case io(path: String, operation: String, errno: Int32)

    public var description: String {
        switch self {
        case let .unsafePermissions(path, mode, fix):
            return "\(path) is accessible by other users (mode \(String(mode & 0o777, radix: 8))); devtrust refuses to use it. Run: \(fix)"
        case let .wrongOwner(path, owner, expected):
            return "\(path) is owned by uid \(owner), not by you (uid \(expected)); devtrust refuses to use it. Use a keystore of your own (--keystore DIR) or fix the owner (chown)."
        case let .notRegularFile(path):
            return "\(path) is not a regular file (a symlink or device?); devtrust refuses to follow it. Remove it and run `devtrust init`."
        case let .notDirectory(path):
            return "\(path) is not a directory; point --keystore at a directory."
        case let .corrupt(path, detail):
            // The manifest: reset moves the whole keystore aside; a key file: init --force replaces it.
            if path.hasSuffix("/" + KeystoreFormat.manifestName) {
                return "\(path) is corrupt: \(detail). `devtrust reset --yes` moves the keystore aside (and says where); then run `devtrust init` (and register again)."
            }
            return "\(path) is corrupt: \(detail). Move it aside and run `devtrust init` (then register again)."
        case let .unsupportedVersion(path, found, supported):
            return "\(path) has keystore version \(found), newer than this devtrust supports (\(supported)); upgrade devtrust."
        case let .locked(path, waited):
            return "the keystore \(path) is locked by another devtrust process (waited \(waited) s); try again when it has finished."
        case let .keyFileMissing(path):
            return "the key file \(path) named by the keystore is missing; run `devtrust init --force` (then register again)."
        case let .io(path, operation, code):
            return "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        }
    }
}
