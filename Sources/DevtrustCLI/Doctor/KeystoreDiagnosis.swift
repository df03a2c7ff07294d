import DevtrustDevice
import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore
import DevtrustSystem
import Glibc

/// `keystore.permissions` and `key.signs`: the keystore directory and its
/// files as the other commands check them (keystore/README.md: the directory
/// 0700, files 0600, all the user's, no symlinks), its manifest, and the key
/// it names loading and signing. Reads only: no lock, no write.
struct KeystoreDiagnosis {
    static let permissionsID = "keystore.permissions"
    static let permissionsTitle = "keystore permissions"
    static let keyID = "key.signs"
    static let keyTitle = "device key loads and signs"

    /// The keystore's path, or why it cannot be told (HOME unset).
    let keystore: Result<Keystore, any Error>

    /// One problem found, and the command that fixes it.
    private struct Finding {
        let verdict: DoctorVerdict
        let detail: String
        let fix: String
    }

    /// The check, and the keystore's state for the checks that need it (nil when there is no keystore yet).
    func permissions() -> (check: DoctorCheck, state: Result<KeystoreState?, any Error>) {
        let keystore: Keystore
        do {
            keystore = try self.keystore.get()
        } catch {
            return (DoctorCheck.failed(Self.permissionsID, Self.permissionsTitle, error,
                                       fallbackFix: "name the keystore with --keystore DIR or DEVTRUST_KEYSTORE"), .failure(error))
        }
        let path = keystore.path
        var info = stat()
        if stat(path, &info) != 0 {
            let code = errno
            if code == ENOENT {
                return (DoctorCheck(Self.permissionsID, Self.permissionsTitle, .skip, "no keystore at \(path) yet (no device key)",
                                    fix: "devtrust init"), .success(nil))
            }
            let error = KeystoreError.io(path: path, operation: "stat", errno: code)
            return (DoctorCheck.failed(Self.permissionsID, Self.permissionsTitle, error, fallbackFix: "check the keystore's path and its parents' permissions"),
                    .failure(error))
        }
        var findings = [Finding]()
        var fileCount = 0
        if info.st_mode & S_IFMT != S_IFDIR {
            findings.append(Finding(verdict: .fail, detail: "\(path) is not a directory",
                                    fix: "point --keystore (or DEVTRUST_KEYSTORE) at the keystore directory"))
        } else {
            findings += ownership(of: info, path: path, expectedMode: 0o700, refused: true)
            if let names = DirectoryListing.names(path) {
                for name in names {
                    let (findingsForFile, isFile) = fileFindings(path: (path.hasSuffix("/") ? path : path + "/") + name, name: name, owner: keystore.ownerID)
                    findings += findingsForFile
                    if isFile { fileCount += 1 }
                }
            } else if findings.isEmpty {
                findings.append(Finding(verdict: .fail, detail: "\(path) cannot be listed: \(String(cString: strerror(errno)))",
                                        fix: "chmod 700 \(shellQuoted(path))"))
            }
        }
        // The manifest as every command reads it (corrupt, or from a newer devtrust), once the files are sound.
        let state: Result<KeystoreState?, any Error> = Result { try keystore.load() }
        if !findings.contains(where: { $0.verdict == .fail }), case let .failure(error) = state {
            let explained = DoctorExplanation(error)
            findings.append(Finding(verdict: .fail, detail: explained.detail, fix: explained.fix ?? "devtrust reset --yes"))
        }
        let worst: DoctorVerdict = findings.contains { $0.verdict == .fail } ? .fail : findings.isEmpty ? .pass : .warn
        guard worst != .pass else {
            let files = fileCount == 0 ? "" : fileCount == 1 ? " and its file 0600" : " and its \(fileCount) files 0600"
            let manifest = (try? state.get()) == nil ? "no keystore.json yet" : "keystore.json reads"
            return (DoctorCheck(Self.permissionsID, Self.permissionsTitle, .pass,
                                "\(path): the directory is mode 0700\(files), all owned by you; \(manifest)"), state)
        }
        let shown = findings.filter { worst == .warn || $0.verdict == .fail }
        return (DoctorCheck(Self.permissionsID, Self.permissionsTitle, worst, shown.map(\.detail).joined(separator: "; "),
                            fix: Self.joined(shown.map(\.fix))), state)
    }

    /// What is wrong with an entry of the keystore directory, and whether it is a file.
    private func fileFindings(path: String, name: String, owner: UInt32) -> (findings: [Finding], isFile: Bool) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return ([], false) }
        switch info.st_mode & S_IFMT {
        case S_IFLNK:
            // Files are opened with O_NOFOLLOW: a symlink is refused, never followed.
            return ([Finding(verdict: .fail, detail: "\(path) is a symlink, which devtrust refuses to follow",
                             fix: "rm \(shellQuoted(path))" + (name.hasPrefix("key-") ? ", then devtrust init --force" : ""))], false)
        case S_IFREG:
            // The manifest and the lock file are not refused when others can read them (the directory keeps
            // them out); the key, token and cache files are. devtrust writes them all 0600.
            let refused = name != KeystoreFormat.manifestName && name != ".lock"
            return (ownership(of: info, path: path, expectedMode: 0o600, refused: refused), true)
        default:
            return ([], false)
        }
    }

    /// The owner and mode of `path` against what devtrust writes (`expectedMode`); `refused`: whether
    /// the commands refuse it when group or others have access (a warning otherwise).
    private func ownership(of info: stat, path: String, expectedMode: mode_t, refused: Bool) -> [Finding] {
        let owner = (try? keystore.get().ownerID) ?? geteuid()
        var findings = [Finding]()
        if info.st_uid != owner {
            findings.append(Finding(verdict: .fail, detail: "\(path) is owned by uid \(info.st_uid), not by you (uid \(owner)); devtrust refuses it",
                                    fix: "sudo chown \(owner) \(shellQuoted(path)), or use a keystore of your own (--keystore DIR)"))
        }
        let mode = info.st_mode & 0o777
        if mode & 0o077 != 0 {
            let consequence = refused ? "devtrust refuses it" : "devtrust writes it 0\(String(expectedMode, radix: 8))"
            findings.append(Finding(verdict: refused ? .fail : .warn,
                                    detail: "\(path) is mode 0\(String(mode, radix: 8)): group or others have access; \(consequence)",
                                    fix: "chmod \(String(expectedMode, radix: 8)) \(shellQuoted(path))"))
        }
        return findings
    }

    /// Fixes in order, each once: chmod and chown commands joined into one command line.
    private static func joined(_ fixes: [String]) -> String {
        var unique = [String]()
        for fix in fixes where !unique.contains(fix) { unique.append(fix) }
        let commands = unique.allSatisfy { $0.hasPrefix("chmod ") || $0.hasPrefix("rm ") && !$0.contains(",") }
        return unique.joined(separator: commands ? " && " : "; ")
    }

    /// `key.signs`: the key loads (for a TPM key: the TPM loads it and signs a test digest, in a
    /// session salted to its parent, as `status` checks it), and its signature of a test digest
    /// verifies with the public key the keystore holds. Never creates or changes a key.
    func keySigns(state: Result<KeystoreState?, any Error>, store: DeviceStore?) -> DoctorCheck {
        guard let store, case let .success(loaded) = state else {
            return DoctorCheck(Self.keyID, Self.keyTitle, .fail, "the keystore cannot be read, so neither can the key (see \(Self.permissionsID))",
                               fix: "fix \(Self.permissionsID) first")
        }
        guard let record = loaded?.key else {
            return DoctorCheck(Self.keyID, Self.keyTitle, .fail, "no device key in \(store.keystore.path)",
                               fix: "devtrust init (then devtrust register --server URL)")
        }
        do {
            let device = try store.loadKey()
            try store.check(device)
            if device.key is SoftwareDeviceKey { try device.key.checkCanSign(random: store.random) }
            let notices = store.tpmNotices.drain()
            let tpmKey = device.key as? TPMDeviceKey
            let place = tpmKey.map { " in the TPM at \($0.selection.candidates.joined(separator: " or "))" } ?? ""
            var detail = "the \(record.backend.rawValue) key \(record.fingerprint)\(place) loads and signs a test digest, which its public key verifies"
            for notice in notices { detail += "; " + notice }
            if let advice = StatusCommand.lockoutAdvice(tpmKey?.lockoutExposure) {
                return DoctorCheck(Self.keyID, Self.keyTitle, .warn, detail + "; but it is exposed to dictionary-attack lockout", fix: advice)
            }
            return DoctorCheck(Self.keyID, Self.keyTitle, .pass, detail)
        } catch {
            let failed = DoctorCheck.failed(Self.keyID, Self.keyTitle, error, fallbackFix: "see `devtrust status`")
            let notices = store.tpmNotices.drain()
            guard !notices.isEmpty else { return failed }
            return DoctorCheck(failed.id, failed.title, failed.verdict, ([failed.detail] + notices).joined(separator: "; "), fix: failed.fix)
        }
    }
}
