import DevtrustKeys
import DevtrustKeystore
import Glibc

/// The user doctor runs as: the groups of this login session, and whether
/// the group database lists the user in a group (a membership added since
/// the session started applies only from the next login).
package struct DoctorUser {
    package let uid: UInt32
    package let name: String?
    package let primaryGroup: gid_t?
    package let sessionGroups: Set<gid_t>

    package static func current(uid: UInt32) -> DoctorUser {
        let entry = getpwuid(uid)
        let name = entry.map { String(cString: $0.pointee.pw_name) }
        let primary = entry.map { $0.pointee.pw_gid }
        var groups = [gid_t](repeating: 0, count: Int(max(getgroups(0, nil), 0)))
        let count = getgroups(Int32(groups.count), &groups)
        return DoctorUser(uid: uid, name: name, primaryGroup: primary, sessionGroups: Set(groups.prefix(max(Int(count), 0)) + [getegid()]))
    }

    /// Whether /etc/group (through NSS) lists the user in `group`, or it is the user's primary group.
    package func isListed(in group: gid_t) -> Bool {
        if primaryGroup == group { return true }
        guard let name, let entry = getgrgid(group), var member = entry.pointee.gr_mem else { return false }
        while let pointer = member.pointee {
            if String(cString: pointer) == name { return true }
            member += 1
        }
        return false
    }

    /// The name for commands: the user's, or `$USER` when it has none.
    package var shellName: String { name ?? "$USER" }

    package var described: String { (name.map { "\($0), " } ?? "") + "uid \(uid)" }
}

/// The device node a `device:` TCTI opens, as the user running doctor finds it.
package struct TPMDeviceNode {
    package let path: String
    package let info: stat?
    /// Whether this user may open it read-write (access(2), as the TSS opens it).
    package let openable: Bool

    /// The path a TCTI configuration opens: `device:PATH`, `device` alone is /dev/tpm0 (the TSS's default); nil for other TCTIs.
    package static func path(ofTCTI configuration: String) -> String? {
        let parts = configuration.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.first == "device" else { return nil }
        return parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : "/dev/tpm0"
    }

    package static func inspect(_ path: String) -> TPMDeviceNode {
        var info = stat()
        guard stat(path, &info) == 0 else { return TPMDeviceNode(path: path, info: nil, openable: false) }
        return TPMDeviceNode(path: path, info: info, openable: access(path, R_OK | W_OK) == 0)
    }

    package var exists: Bool { info != nil }
    package var isCharacterDevice: Bool { info.map { $0.st_mode & S_IFMT == S_IFCHR } ?? false }
    package var groupID: gid_t? { info?.st_gid }
    package var groupName: String? { info.flatMap { getgrgid($0.st_gid) }.map { String(cString: $0.pointee.gr_name) } }
    /// Whether its group may open it read-write (then membership in that group is the way in).
    package var groupMayOpen: Bool { info.map { $0.st_mode & 0o060 == 0o060 && $0.st_gid != 0 } ?? false }

    /// `crw-rw---- root:tss`, as ls shows it.
    package var described: String {
        guard let info else { return "missing" }
        let kinds: [mode_t: Character] = [S_IFCHR: "c", S_IFBLK: "b", S_IFDIR: "d", S_IFLNK: "l", S_IFREG: "-", S_IFIFO: "p", S_IFSOCK: "s"]
        var text = String(kinds[info.st_mode & S_IFMT] ?? "?")
        for shift in stride(from: 6, through: 0, by: -3) {
            let bits = (info.st_mode >> mode_t(shift)) & 7
            text += (bits & 4 != 0 ? "r" : "-") + (bits & 2 != 0 ? "w" : "-") + (bits & 1 != 0 ? "x" : "-")
        }
        let owner = getpwuid(info.st_uid).map { String(cString: $0.pointee.pw_name) } ?? String(info.st_uid)
        return text + " " + owner + ":" + (groupName ?? String(info.st_gid))
    }

    /// Whether its group may read it but not write it (0640: no group membership opens it read-write).
    package var groupMayOnlyRead: Bool { info.map { $0.st_mode & 0o060 == 0o040 } ?? false }

    /// For a missing resource manager node (DIR/tpmrm0), the TPM's own node beside it (DIR/tpm0) when that exists.
    package var directDevice: String? { TPMSelection.directDevice(besideResourceManager: path) }

    /// Why it is missing, in a few words.
    package var missingDetail: String {
        guard let directDevice else { return "\(path) does not exist: no TPM here" }
        return "\(path) does not exist, but \(directDevice) does: the TPM has no kernel resource manager (a kernel older than 4.12?)"
    }

    /// What to do when it is missing.
    package var missingFix: String {
        if let directDevice {
            return "start tpm2-abrmd (--tcti tabrmd), or use --tcti device:\(directDevice) (one process at a time)"
        }
        return "this machine has no TPM, or it is disabled: enable it in the firmware (BIOS/UEFI) settings, or give --tcti for another TPM"
    }
}

/// The TCTI named by `--tcti` or a TCTI variable where the keystore recorded
/// another one with the key: the key's TPM is the recorded one, this run uses the other.
package struct TCTIOverride: Sendable {
    /// What names the TCTI in effect: `--tcti`, or the variable.
    package let source: String
    package let tcti: String
    /// The one recorded with the key at init, nil when none was.
    package let recorded: String?
    /// What devtrust would use without the override (the recorded TCTI, else the default).
    package let withoutOverride: TPMSelection

    /// How to stop overriding.
    package var undo: String {
        source == "--tcti" ? "leave out --tcti \(tcti)" : "unset \(source)"
    }

    /// `the key was recorded with swtpm:… at init, but DEVTRUST_TCTI makes this run use device:…`.
    package var described: String {
        guard let recorded else {
            return "\(source) makes this run use \(tcti); the keystore records no TCTI for the key (without \(source), devtrust uses \(withoutOverride.candidates.joined(separator: " or ")))"
        }
        return "the key was recorded with \(recorded) at init, but \(source) makes this run use \(tcti)"
    }

    /// The override in effect for a run, when it names another TCTI than the one devtrust would use for the key without it.
    package static func of(_ selection: TPMSelection, global tcti: String?, environment: [String: String], recorded: String?) -> TCTIOverride? {
        guard selection.isExplicit, let inUse = selection.candidates.first else { return nil }
        let variables = ["DEVTRUST_TCTI", "TPM2TOOLS_TCTI", "TSS2_TCTI"]
        let source = tcti?.isEmpty == false ? "--tcti" : variables.first { environment[$0]?.isEmpty == false } ?? "--tcti"
        var plain = environment
        for name in variables { plain[name] = nil }
        let without = TPMSelection(explicit: nil, environment: plain).forKey(recordedTCTI: recorded)
        guard without.candidates != [inUse] else { return nil }
        return TCTIOverride(source: source, tcti: inUse, recorded: recorded.flatMap { TPMSelection.isRecordable($0) ? $0 : nil }, withoutOverride: without)
    }
}

/// `tpm.reachable`, `tpm.device-permissions` and `tpm.group` for the TPM in
/// effect (`--tcti`, a TCTI variable, else the one recorded with the key,
/// else the default). A problem fails when the device key is in the TPM and
/// is a warning otherwise; the checks skip where there is no TPM at all and
/// the key does not need one.
package struct TPMDiagnosis {
    package static let reachableID = "tpm.reachable"
    package static let reachableTitle = "TPM reachable"
    package static let permissionsID = "tpm.device-permissions"
    package static let groupID = "tpm.group"

    package let selection: TPMSelection
    /// The device key's backend, nil without a key.
    package let keyBackend: KeyBackend?
    /// False when the keystore cannot be read: whether a key needs the TPM is not known.
    package let keyKnown: Bool
    package let user: DoctorUser
    /// Set when `--tcti` or a variable overrides the TCTI recorded with the key (or the default).
    package let override: TCTIOverride?
    /// The first TCTI's device node, for a `device:` TCTI.
    package let node: TPMDeviceNode?

    package init(selection: TPMSelection, keyBackend: KeyBackend?, keyKnown: Bool, user: DoctorUser, override: TCTIOverride? = nil) {
        self.selection = selection
        self.keyBackend = keyBackend
        self.keyKnown = keyKnown
        self.user = user
        self.override = override
        node = selection.candidates.first.flatMap(TPMDeviceNode.path(ofTCTI:)).map(TPMDeviceNode.inspect)
    }

    private var needed: Bool { keyBackend == .tpm }
    private var problem: DoctorVerdict { needed ? .fail : .warn }
    private var tcti: String { selection.candidates.first ?? "" }
    private var noTPMHere: Bool { node.map { !$0.exists } ?? false }

    /// Why a missing TPM is no problem for this key.
    private var keyNeedsNone: String {
        switch keyBackend {
        case .software?: return "; the software key needs none"
        case .tpm?: return ""
        case nil: return keyKnown ? "; `devtrust init` makes a software key" : ""
        }
    }

    /// A TPM answers a command (GetCapability, as `status` asks it) through the TCTI.
    /// It talks to the TPM: the command runs it in a child process with a deadline.
    package func reachable() -> DoctorCheck {
        let id = Self.reachableID, title = Self.reachableTitle
        let check: DoctorCheck
        do {
            let description = try TPMKeyProvisioner.describe(selection)
            check = DoctorCheck(id, title, .pass, "a TPM answers at \(description.tcti): \(description.manufacturer), firmware \(description.firmwareVersion)")
        } catch {
            let explained = DoctorExplanation(error)
            if case .softwareStackMissing = error, !needed {
                check = DoctorCheck(id, title, .skip, "cannot ask: tpm2-tss cannot be loaded (see library.tss2-esys)\(keyNeedsNone)")
            } else if noTPMHere && !needed {
                check = DoctorCheck(id, title, .skip, explained.detail + (explained.fix.map { ": " + $0 } ?? "") + keyNeedsNone)
            } else {
                check = DoctorCheck(id, title, problem, explained.detail, fix: explained.fix ?? "check that the TPM (or its resource manager or simulator) is running and that --tcti names it")
            }
        }
        return annotated(check)
    }

    /// The check when the TPM did not answer within `seconds` (the TSS would have waited for ever).
    package func unanswered(seconds: Double) -> DoctorCheck {
        annotated(DoctorCheck(Self.reachableID, Self.reachableTitle, problem,
                              "the TPM at \(tcti) did not answer within \(Int(seconds)) s (its connection was accepted, but no answer came)",
                              fix: "check that the TPM (or its resource manager or simulator) at \(tcti) is working: restart it, or name another one with --tcti"))
    }

    /// A check with the TCTI override said, and undoing it offered as a way to the key's own TPM.
    package func annotated(_ check: DoctorCheck) -> DoctorCheck {
        guard let override, keyBackend == .tpm else { return check }
        let detail = check.detail + " (\(override.described))"
        guard check.verdict == .fail || check.verdict == .warn else { return check.with(detail: detail) }
        return check.with(detail: detail, fix: .some((check.fix.map { $0 + "; or" } ?? "") + " \(override.undo) to use the key's own TPM"))
    }

    /// The device node exists, is a character device, and this user may open it read-write.
    package func devicePermissions() -> DoctorCheck {
        let title = "TPM device permissions"
        guard let node else {
            return DoctorCheck(Self.permissionsID, title, .skip, "the TCTI \(tcti) opens no device node: nothing to check")
        }
        guard node.exists else {
            if !needed { return DoctorCheck(Self.permissionsID, title, .skip, node.missingDetail + keyNeedsNone) }
            return DoctorCheck(Self.permissionsID, title, .fail, node.missingDetail, fix: node.missingFix)
        }
        guard node.isCharacterDevice else {
            return DoctorCheck(Self.permissionsID, title, problem, "\(node.path) is not a device node (\(node.described))",
                               fix: "point --tcti at the TPM's device node, e.g. --tcti device:/dev/tpmrm0")
        }
        if node.openable {
            return DoctorCheck(Self.permissionsID, title, .pass, "\(node.path) (\(node.described)) opens read-write for you")
        }
        return DoctorCheck(Self.permissionsID, title, problem,
                           "\(node.path) (\(node.described)) does not open read-write for you (\(user.described))", fix: accessFix(node))
    }


    /// The user is in the group that may open the device: in this session, not only in /etc/group.
    /// Where no group may open it read-write (its mode), no membership helps: that is said instead.
    package func group() -> DoctorCheck {
        let title = "TPM group membership"
        guard let node else {
            return DoctorCheck(Self.groupID, title, .skip, "the TCTI \(tcti) opens no device node: no group is needed")
        }
        guard node.exists else {
            return DoctorCheck(Self.groupID, title, .skip, "no device node at \(node.path): group membership does not matter here")
        }
        let why = user.uid == 0 ? "as root" : "by its owner or mode"
        guard node.groupMayOpen, let gid = node.groupID else {
            // No group may open it read-write: membership of tss matters only once tpm-udev's rule gives it to tss.
            let tss = getgrnam("tss").map { $0.pointee.gr_gid }
            let inTss = tss.map { user.sessionGroups.contains($0) } ?? false
            let modeSays = node.groupMayOnlyRead
                ? "\(node.path) (\(node.described)) gives its group \(node.groupName ?? String(node.groupID ?? 0)) read access only"
                : "\(node.path) (\(node.described)) gives no group access"
            if node.openable {
                return DoctorCheck(Self.groupID, title, .pass, "\(modeSays), but it opens for you \(why): no group is needed")
            }
            let membership = tss == nil ? "there is no group tss on this machine"
                : inTss ? "you are in group tss, which cannot open it until its mode gives the group read-write access"
                : "you (\(user.described)) are not in group tss either"
            let join = tss == nil || !inTss ? ", then sudo usermod -aG tss \(user.shellName) and log out and back in" : ""
            return DoctorCheck(Self.groupID, title, problem, "\(modeSays), so no group membership opens it read-write; \(membership)",
                               fix: "sudo apt-get install tpm-udev (its udev rule makes \(node.path) read-write for group tss: mode 0660)\(join)")
        }
        let name = node.groupName ?? String(gid)
        if user.sessionGroups.contains(gid) {
            if node.openable { return DoctorCheck(Self.groupID, title, .pass, "you are in group \(name), whose members may open \(node.path)") }
            return DoctorCheck(Self.groupID, title, problem, "you are in group \(name), whose members may open \(node.path) by its mode, yet it does not open for you",
                               fix: "check what else limits access to \(node.path) (an ACL: getfacl \(node.path); a security module)")
        }
        if user.isListed(in: gid) {
            if node.openable { return DoctorCheck(Self.groupID, title, .pass, "\(node.path) opens for you \(why) (group \(name) applies from your next login)") }
            return DoctorCheck(Self.groupID, title, problem, "you were added to group \(name) after this login session started: the membership applies from the next login",
                               fix: "log out and back in (or run `newgrp \(name)`)")
        }
        if node.openable {
            return DoctorCheck(Self.groupID, title, .pass, "you are not in group \(name), but \(node.path) opens for you \(why)")
        }
        return DoctorCheck(Self.groupID, title, problem, "you (\(user.described)) are not in group \(name), whose members may open \(node.path)",
                           fix: "sudo usermod -aG \(name) \(user.shellName), then log out and back in")
    }

    /// How this user gets read-write access to the node.
    private func accessFix(_ node: TPMDeviceNode) -> String {
        guard node.groupMayOpen, let name = node.groupName, let gid = node.groupID else {
            return "sudo apt-get install tpm-udev (its udev rule makes \(node.path) read-write for group tss: mode 0660), then sudo usermod -aG tss \(user.shellName) and log out and back in"
        }
        if user.isListed(in: gid) && !user.sessionGroups.contains(gid) {
            return "log out and back in (or run `newgrp \(name)`): you were added to group \(name) after this session started"
        }
        return "sudo usermod -aG \(name) \(user.shellName), then log out and back in"
    }
}
