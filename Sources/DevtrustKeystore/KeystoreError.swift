import DevtrustEncoding
import DevtrustErrors
import Glibc

/// Anything wrong with the keystore on disk. Every case names the path and
/// says what to do; all are keystore failures (its `classification`).
public enum KeystoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsafePermissions(path: String, mode: UInt32, fix: String)
    case wrongOwner(path: String, owner: UInt32, expected: UInt32)
    case notRegularFile(path: String)
    case notDirectory(path: String)
    case corrupt(path: String, detail: String)
    case unsupportedVersion(path: String, found: Int64, supported: Int64)
    case locked(path: String, waitedSeconds: Int)
    case keyFileMissing(path: String)
    /// A state too large for the keystore to read back (`Keystore.maximumManifestBytes`): not written.
    case stateTooLarge(path: String, bytes: Int, limit: Int)
    case io(path: String, operation: String, errno: Int32)

    /// What failed, then what to do, joined as `separator` says.
    public var description: String { classification.message }

    /// What failed (the message without the hint).
    public var summary: String {
        switch self {
        case let .unsafePermissions(path, mode, _):
            return "\(path) is accessible by other users (mode \(String(mode & 0o777, radix: 8))); devtrust refuses to use it"
        case let .wrongOwner(path, owner, expected):
            return "\(path) is owned by uid \(owner), not by you (uid \(expected)); devtrust refuses to use it"
        case let .notRegularFile(path):
            return "\(path) is not a regular file (a symlink or device?); devtrust refuses to follow it"
        case let .notDirectory(path):
            return "\(path) is not a directory"
        case let .corrupt(path, detail):
            return "\(path) is corrupt: \(detail)"
        case let .unsupportedVersion(path, found, supported):
            return "\(path) has keystore version \(found), newer than this devtrust supports (\(supported))"
        case let .locked(path, waited):
            return "the keystore \(path) is locked by another devtrust process (waited \(waited) s)"
        case let .keyFileMissing(path):
            return "the key file \(path) named by the keystore is missing"
        case let .stateTooLarge(path, bytes, limit):
            return "\(path) would be \(bytes) bytes, more than the \(limit) a keystore is read up to, so devtrust did not write it: the keystore is as it was"
        case let .io(path, operation, code):
            return "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        }
    }

    /// What to do, kept apart from `summary` (a path in it may hold any text, ". " included); nil when there is nothing to say.
    public var hint: String? {
        switch self {
        case let .unsafePermissions(_, _, fix):
            return "Run: \(fix)"
        case .wrongOwner:
            return "Use a keystore of your own (--keystore DIR) or fix the owner (chown)."
        case let .notRegularFile(path):
            return Self.notRegularFileHint(path)
        case .notDirectory:
            return "point --keystore at a directory."
        case let .corrupt(path, _):
            return Self.corruptHint(path)
        case .unsupportedVersion:
            return "upgrade devtrust."
        case .locked:
            return "try again when it has finished."
        case .keyFileMissing:
            return "the device key is lost (unless you have a copy of that file: put it back): `devtrust init --force` makes a new one and forgets the registrations made with this one (then register again)."
        case .stateTooLarge:
            return "forget what is no longer used (`devtrust status` lists the registrations and sign-ins; `devtrust logout` forgets a sign-in, `devtrust reset` the registrations)."
        case .io:
            return nil
        }
    }

    /// What joins `summary` and `hint` in `description`.
    public var separator: String {
        switch self {
        case .unsafePermissions, .wrongOwner, .notRegularFile, .corrupt: return ". "
        case .notDirectory, .unsupportedVersion, .locked, .keyFileMissing, .stateTooLarge, .io: return "; "
        }
    }

    /// Which of devtrust's files a path in the keystore is (by its name).
    public enum FileKind: Sendable {
        case manifest, lock, key, signIn, other

        public init(path: String) {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            if name == KeystoreFormat.manifestName { self = .manifest }
            else if name == ".lock" { self = .lock }
            else if name.hasPrefix(Keystore.keyFilePrefix) { self = .key }
            else if name.hasPrefix(Keystore.signInFilePrefix) { self = .signIn }
            else { self = .other }
        }
    }

    /// A symlink (or a device) in place of one of devtrust's files: when it links to the user's own
    /// copy, that copy goes in its place; what is lost without one depends on the file.
    private static func notRegularFileHint(_ path: String) -> String {
        let quoted = shellQuoted(path)
        let kind = FileKind(path: path)
        if kind == .lock { return "Remove it (rm \(quoted)): it holds nothing, and devtrust makes it again." }
        let replace = "If it links to your own copy of the file, put that copy in its place: cp --remove-destination -- \"$(readlink -f -- \(quoted))\" \(quoted) && chmod 600 \(quoted)"
        switch kind {
        case .key:
            return replace + "; without such a copy the device key is lost: `devtrust init --force` makes a new one and forgets the registrations made with this one (then register again)."
        case .manifest:
            return replace + "; without one, `devtrust reset --yes` moves the keystore aside (then `devtrust init`, and register again)."
        case .signIn:
            return replace + "; without one, `devtrust logout` forgets the sign-in (then sign in again)."
        case .lock, .other:
            return replace + "."
        }
    }

    private static func corruptHint(_ path: String) -> String {
        switch FileKind(path: path) {
        case .manifest:
            // reset moves the whole keystore aside.
            return "`devtrust reset --yes` moves the keystore aside (and says where); then run `devtrust init` (and register again)."
        case .key:
            return "The device key in it is lost, unless you have a good copy of the file (put it back): `devtrust init --force` makes a new key and forgets the registrations made with this one (then register again)."
        case .signIn:
            return "`devtrust logout` forgets the sign-in (its tokens cannot be revoked at the server); then sign in again."
        case .lock, .other:
            return "Move it aside (mv \(shellQuoted(path)) \(shellQuoted(path + ".damaged")))."
        }
    }
}

extension KeystoreError: ClassifiedError {
    /// A keystore failure, with what failed and what to do apart: told apart where the error makes
    /// them, never by searching the text (a path may hold ". ").
    public var classification: ErrorClassification {
        ErrorClassification(.keystore, summary: summary, hint: hint.map { ErrorHint($0, joinedBy: separator) })
    }
}
