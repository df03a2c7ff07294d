import DevtrustDevice
import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore
import DevtrustSystem
import Glibc

/// `keystore.permissions` and `key.signs`: the keystore directory and its
/// files as the other commands check them (keystore/README.md: the directory
/// 0700, files 0600, all the user's, no symlinks; the directory one devtrust
/// can write in), its manifest, and the key it names loading and signing.
/// Reads only: no lock, no write. What it says of modes and owners it read
/// from the files.
package struct KeystoreDiagnosis {
    package static let permissionsID = "keystore.permissions"
    package static let permissionsTitle = "keystore permissions"
    package static let keyID = "key.signs"
    package static let keyTitle = "device key loads and signs"

    /// The keystore's path, or why it cannot be told (HOME unset).
    package let keystore: Result<Keystore, any Error>
    /// The user doctor runs as (root may read and write whatever the modes say).
    package let userID: UInt32

    /// One problem found, and the command that fixes it.
    private struct Finding {
        package let verdict: DoctorVerdict
        package let detail: String
        package let fix: String
    }

    /// An entry of the keystore directory as found: its name and lstat.
    private struct Entry {
        package let name: String
        package let path: String
        package let info: stat
        package var isFile: Bool { info.st_mode & S_IFMT == S_IFREG }
        package var isSymlink: Bool { info.st_mode & S_IFMT == S_IFLNK }
        package var mode: mode_t { info.st_mode & 0o777 }
    }

    /// The check, and the keystore's state for the checks that need it (nil when there is no keystore yet).
    package func permissions() -> (check: DoctorCheck, state: Result<KeystoreState?, any Error>) {
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
        guard info.st_mode & S_IFMT == S_IFDIR else {
            let finding = Finding(verdict: .fail, detail: "\(path) is not a directory", fix: "point --keystore (or DEVTRUST_KEYSTORE) at the keystore directory")
            return (DoctorCheck(Self.permissionsID, Self.permissionsTitle, .fail, finding.detail, fix: finding.fix), .failure(KeystoreError.notDirectory(path: path)))
        }
        let owner = keystore.ownerID
        var findings = [Finding]()
        var entries = [Entry]()
        if info.st_uid != owner {
            findings.append(foreignDirectory(path, owner: info.st_uid, expected: owner))
        } else {
            findings += directoryFindings(path, info: info)
            if let names = DirectoryListing.names(path) {
                for name in names {
                    var entryInfo = stat()
                    let entryPath = (path.hasSuffix("/") ? path : path + "/") + name
                    if lstat(entryPath, &entryInfo) == 0 { entries.append(Entry(name: name, path: entryPath, info: entryInfo)) }
                }
            } else if findings.isEmpty {
                findings.append(Finding(verdict: .fail, detail: "\(path) cannot be listed: \(String(cString: strerror(errno)))",
                                        fix: "chmod 700 \(shellQuoted(path))"))
            }
        }
        let state: Result<KeystoreState?, any Error> = Result { try keystore.load() }
        let loss = KeyLoss((try? state.get()) ?? nil)
        findings += entries.filter(\.isSymlink).map { symlinkFinding($0, in: path, owner: owner, loss: loss) }
        let files = entries.filter(\.isFile)
        findings += foreignFiles(files, directory: path, owner: owner)
        findings += modeFindings(files.filter { $0.info.st_uid == owner })
        // The manifest as every command reads it (corrupt, or from a newer devtrust), once the files are sound.
        if !findings.contains(where: { $0.verdict == .fail }), case let .failure(error) = state {
            let explained = DoctorExplanation(error)
            findings.append(Finding(verdict: .fail, detail: explained.detail, fix: explained.fix ?? "devtrust reset --yes"))
        }
        let worst: DoctorVerdict = findings.contains { $0.verdict == .fail } ? .fail : findings.isEmpty ? .pass : .warn
        guard worst != .pass else {
            let manifest = (try? state.get()) == nil ? "no keystore.json yet" : "keystore.json reads"
            return (DoctorCheck(Self.permissionsID, Self.permissionsTitle, .pass,
                                "\(path): the directory is mode \(Self.octal(info.st_mode & 0o777))\(Self.modes(of: files)), all owned by you; \(manifest)"), state)
        }
        let shown = findings.filter { worst == .warn || $0.verdict == .fail }
        return (DoctorCheck(Self.permissionsID, Self.permissionsTitle, worst, shown.map(\.detail).joined(separator: "; "),
                            fix: Self.joined(shown.map(\.fix))), state)
    }

    /// ` and its 3 files 0600`, or each file's mode where they differ.
    private static func modes(of files: [Entry]) -> String {
        guard let first = files.first else { return "" }
        if files.allSatisfy({ $0.mode == first.mode }) {
            return files.count == 1 ? " and its file \(first.name) \(octal(first.mode))" : " and its \(files.count) files \(octal(first.mode))"
        }
        return ", its files " + DoctorText.listed(files.map { "\($0.name) \(octal($0.mode))" })
    }

    package static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// The directory's mode: no access for group or others (refused), and read, write and search for its owner
    /// (without them devtrust cannot list, read or write the keystore: init, register and login fail).
    private func directoryFindings(_ path: String, info: stat) -> [Finding] {
        var findings = [Finding]()
        let mode = info.st_mode & 0o777
        if mode & 0o077 != 0 {
            findings.append(Finding(verdict: .fail, detail: "\(path) is mode \(Self.octal(mode)): group or others have access; devtrust refuses it",
                                    fix: "chmod 700 \(shellQuoted(path))"))
        } else if access(path, R_OK | W_OK | X_OK) != 0 {
            findings.append(Finding(verdict: .fail,
                                    detail: "\(path) is mode \(Self.octal(mode)): devtrust cannot \(mode & 0o100 == 0 ? "open anything in" : mode & 0o400 == 0 ? "list" : "write in") it (init, register, login and refreshes fail)",
                                    fix: "chmod 700 \(shellQuoted(path))"))
        }
        return findings
    }

    /// Group or others have access to a file (refused for all but the manifest and the lock, which
    /// the directory keeps private), or its owner cannot read it.
    private func modeFindings(_ files: [Entry]) -> [Finding] {
        var findings = [Finding]()
        for file in files {
            let refused = file.name != KeystoreFormat.manifestName && file.name != ".lock"
            if file.mode & 0o077 != 0 {
                let consequence = refused ? "devtrust refuses it" : "devtrust writes it 0600"
                findings.append(Finding(verdict: refused ? .fail : .warn,
                                        detail: "\(file.path) is mode \(Self.octal(file.mode)): group or others have access; \(consequence)",
                                        fix: "chmod 600 \(shellQuoted(file.path))"))
            } else if access(file.path, R_OK) != 0 {
                findings.append(Finding(verdict: .fail, detail: "\(file.path) is mode \(Self.octal(file.mode)): devtrust cannot read it",
                                        fix: "chmod 600 \(shellQuoted(file.path))"))
            }
        }
        return findings
    }

    /// The keystore directory belongs to another user: that user's keystore, not something to take over.
    private func foreignDirectory(_ path: String, owner: UInt32, expected: UInt32) -> Finding {
        let name = Self.userName(owner).map { "\($0), " } ?? ""
        let detail = "\(path) belongs to another user (\(name)uid \(owner)), not to you (uid \(expected)); devtrust refuses it"
        let own = "use a keystore of your own (--keystore DIR or DEVTRUST_KEYSTORE=DIR)"
        guard expected == 0 else {
            // Someone else's device key: never a chown the user would take it over with.
            return Finding(verdict: .fail, detail: detail + ": it is that user's keystore", fix: own)
        }
        return Finding(verdict: .fail, detail: detail,
                       fix: "run devtrust as the user it belongs to, or \(own); if it is meant to be root's (restored as another user, say): chown -R 0 \(shellQuoted(path))")
    }

    /// Files in the user's keystore owned by someone else (devtrust run under sudo leaves root's, say): one command for all.
    private func foreignFiles(_ files: [Entry], directory: String, owner: UInt32) -> [Finding] {
        let foreign = files.filter { $0.info.st_uid != owner }
        guard !foreign.isEmpty else { return [] }
        let owners = Set(foreign.map(\.info.st_uid)).sorted().map { uid in "uid \(uid)" + (Self.userName(uid).map { " (\($0))" } ?? "") }
        let what = foreign.count == 1 ? "\(foreign[0].path) is" : "\(foreign.count) files in \(directory) (\(DoctorText.listed(foreign.map(\.name)))) are"
        let chown = "chown -R \(owner) \(shellQuoted(directory))"
        return [Finding(verdict: .fail, detail: "\(what) owned by \(DoctorText.listed(owners)), not by you (uid \(owner)); devtrust refuses \(foreign.count == 1 ? "it" : "them")",
                        fix: (owner == 0 ? chown : "sudo " + chown) + " (the keystore directory is yours: its files should be too)")]
    }

    /// A symlink in place of one of devtrust's files: never followed. Where it points to the user's own
    /// regular file, that file goes in its place; otherwise what is lost without it is said.
    private func symlinkFinding(_ entry: Entry, in directory: String, owner: UInt32, loss: KeyLoss?) -> Finding {
        let link = shellQuoted(entry.path)
        let kind = KeystoreError.FileKind(path: entry.path)
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(entry.path, &buffer, buffer.count - 1)
        let written = count > 0 ? String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        let target = written.hasPrefix("/") ? written : (directory.hasSuffix("/") ? directory : directory + "/") + written
        let detail = "\(entry.path) is a symlink (to \(written)), which devtrust refuses to follow"
        if kind == .lock {
            return Finding(verdict: .fail, detail: detail, fix: "rm \(link) (the lock file holds nothing; devtrust makes it again)")
        }
        var info = stat()
        let usable = stat(target, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_uid == owner
        if usable {
            let description = kind == .key ? "the device key's file" : kind == .manifest ? "the keystore's manifest" : kind == .signIn ? "the sign-in's tokens" : "that file"
            return Finding(verdict: .fail, detail: detail,
                           fix: "if \(shellQuoted(target)) is \(description), put it in the link's place: cp --remove-destination -- \(shellQuoted(target)) \(link) && chmod 600 \(link)")
        }
        let whyNot = stat(target, &info) != 0 ? "\(written) does not exist"
            : info.st_mode & S_IFMT != S_IFREG ? "\(written) is not a regular file"
            : "\(written) belongs to uid \(info.st_uid), not to you"
        let lost: String
        switch kind {
        case .key: lost = "unless you find the key file it stood for (put it in the link's place), " + (loss?.fix ?? "the device key cannot be recovered: `devtrust init --force` makes a new one")
        case .manifest: lost = "unless you find the keystore.json it stood for (put it in the link's place), `devtrust reset --yes` moves the keystore aside"
        case .signIn: lost = "remove the link (rm \(link)); `devtrust logout` then forgets the sign-in (sign in again)"
        case .lock, .other: lost = "remove the link (rm \(link))"
        }
        return Finding(verdict: .fail, detail: detail + " (\(whyNot))", fix: lost)
    }

    private static func userName(_ uid: UInt32) -> String? {
        getpwuid(uid).map { String(cString: $0.pointee.pw_name) }
    }

    /// Fixes in order, each once: chmod commands joined into one command line.
    private static func joined(_ fixes: [String]) -> String {
        var unique = [String]()
        for fix in fixes where !unique.contains(fix) { unique.append(fix) }
        let commands = unique.allSatisfy { $0.hasPrefix("chmod ") }
        return unique.joined(separator: commands ? " && " : "; ")
    }

    /// `key.signs`: the key loads (for a TPM key: the TPM loads it and signs a test digest, in a
    /// session salted to its parent, as `status` checks it), and its signature of a test digest
    /// verifies with the public key the keystore holds. Never creates a key; a TPM key's storage
    /// root key another program evicted is made persistent again, as every command that uses the key does.
    /// It talks to the TPM: the command runs it in a child process with a deadline.
    /// `destroysKey`: the fix replaces the key (which the error says is lost). A file the
    /// other commands refuse (its mode, owner, a symlink) is `keystore.permissions`'s to fix.
    package func keySigns(state: Result<KeystoreState?, any Error>, store: DeviceStore?, permissionsFailed: Bool) -> (check: DoctorCheck, destroysKey: Bool) {
        guard let store, case let .success(loaded) = state else {
            return (DoctorCheck(Self.keyID, Self.keyTitle, .fail, "the keystore cannot be read, so neither can the key (see \(Self.permissionsID))",
                                fix: "fix \(Self.permissionsID) first"), false)
        }
        guard let record = loaded?.key else {
            return (DoctorCheck(Self.keyID, Self.keyTitle, .fail, "no device key in \(store.keystore.path)",
                                fix: "devtrust init (then devtrust register --server URL)"), false)
        }
        do {
            let device = try store.loadKey()
            try store.check(device)
            if device.key is SoftwareDeviceKey { try device.key.checkCanSign(random: store.random) }
            let notices = store.tpmNotices.drainNotices()
            let tpmKey = device.key as? TPMDeviceKey
            let place = tpmKey.map { " in the TPM at \($0.selection.candidates.joined(separator: " or "))" } ?? ""
            let detail = DoctorText.joined(["the \(record.backend.rawValue) key \(record.fingerprint)\(place) loads and signs a test digest, which its public key verifies"]
                                           + notices.map(\.text))
            // The key works, but not as it should until something is put right (another program's key at its parent's handle, say).
            let degraded = notices.filter(\.degraded)
            if !degraded.isEmpty {
                return (DoctorCheck(Self.keyID, Self.keyTitle, .warn, detail, fix: degraded.compactMap(\.fix).joined(separator: "; ")), false)
            }
            if let advice = KeyHealth.lockoutAdvice(tpmKey?.lockoutExposure) {
                return (DoctorCheck(Self.keyID, Self.keyTitle, .warn, detail + "; but it is exposed to dictionary-attack lockout", fix: advice), false)
            }
            return (DoctorCheck(Self.keyID, Self.keyTitle, .pass, detail), false)
        } catch {
            if permissionsFailed, let error = error as? KeystoreError {
                switch error {
                case .unsafePermissions, .wrongOwner, .notRegularFile, .notDirectory, .io:
                    return (DoctorCheck(Self.keyID, Self.keyTitle, .fail, error.summary, fix: "fix \(Self.permissionsID) first"), false)
                default: break
                }
            }
            let explained = DoctorExplanation(error, loss: KeyLoss(loaded))
            let notices = store.tpmNotices.drainNotices()
            let detail = DoctorText.joined([explained.detail] + notices.map(\.text))
            return (DoctorCheck(Self.keyID, Self.keyTitle, .fail, detail, fix: explained.fix ?? "see `devtrust status`"), explained.destroysKey)
        }
    }
}
