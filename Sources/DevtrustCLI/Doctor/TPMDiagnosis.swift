import DevtrustKeys
import DevtrustKeystore
import Glibc

/// The user doctor runs as: the groups of this login session, and whether
/// the group database lists the user in a group (a membership added since
/// the session started applies only from the next login).
struct DoctorUser {
    let uid: UInt32
    let name: String?
    let primaryGroup: gid_t?
    let sessionGroups: Set<gid_t>

    static func current(uid: UInt32) -> DoctorUser {
        let entry = getpwuid(uid)
        let name = entry.map { String(cString: $0.pointee.pw_name) }
        let primary = entry.map { $0.pointee.pw_gid }
        var groups = [gid_t](repeating: 0, count: Int(max(getgroups(0, nil), 0)))
        let count = getgroups(Int32(groups.count), &groups)
        return DoctorUser(uid: uid, name: name, primaryGroup: primary, sessionGroups: Set(groups.prefix(max(Int(count), 0)) + [getegid()]))
    }

    /// Whether /etc/group (through NSS) lists the user in `group`, or it is the user's primary group.
    func isListed(in group: gid_t) -> Bool {
        if primaryGroup == group { return true }
        guard let name, let entry = getgrgid(group), var member = entry.pointee.gr_mem else { return false }
        while let pointer = member.pointee {
            if String(cString: pointer) == name { return true }
            member += 1
        }
        return false
    }

    /// The name for commands: the user's, or `$USER` when it has none.
    var shellName: String { name ?? "$USER" }

    var described: String { (name.map { "\($0), " } ?? "") + "uid \(uid)" }
}

/// The device node a `device:` TCTI opens, as the user running doctor finds it.
struct TPMDeviceNode {
    let path: String
    let info: stat?
    /// Whether this user may open it read-write (access(2), as the TSS opens it).
    let openable: Bool

    /// The path a TCTI configuration opens: `device:PATH`, `device` alone is /dev/tpm0 (the TSS's default); nil for other TCTIs.
    static func path(ofTCTI configuration: String) -> String? {
        let parts = configuration.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.first == "device" else { return nil }
        return parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : "/dev/tpm0"
    }

    static func inspect(_ path: String) -> TPMDeviceNode {
        var info = stat()
        guard stat(path, &info) == 0 else { return TPMDeviceNode(path: path, info: nil, openable: false) }
        return TPMDeviceNode(path: path, info: info, openable: access(path, R_OK | W_OK) == 0)
    }

    var exists: Bool { info != nil }
    var isCharacterDevice: Bool { info.map { $0.st_mode & S_IFMT == S_IFCHR } ?? false }
    var groupID: gid_t? { info?.st_gid }
    var groupName: String? { info.flatMap { getgrgid($0.st_gid) }.map { String(cString: $0.pointee.gr_name) } }
    /// Whether its group may open it read-write (then membership in that group is the way in).
    var groupMayOpen: Bool { info.map { $0.st_mode & 0o060 == 0o060 && $0.st_gid != 0 } ?? false }

    /// `crw-rw---- root:tss`, as ls shows it.
    var described: String {
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

    /// What to do when it is missing.
    var missingFix: String {
        if path.hasSuffix("/tpmrm0"), access(String(path.dropLast(7)) + "/tpm0", F_OK) == 0 {
            return "the TPM at /dev/tpm0 has no kernel resource manager: start tpm2-abrmd (--tcti tabrmd), or use --tcti device:/dev/tpm0 (one process at a time)"
        }
        return "this machine has no TPM, or it is disabled: enable it in the firmware (BIOS/UEFI) settings, or give --tcti for another TPM"
    }
}

/// `tpm.reachable`, `tpm.device-permissions` and `tpm.group` for the TPM in
/// effect (`--tcti`, a TCTI variable, else the one recorded with the key,
/// else the default). A problem fails when the device key is in the TPM and
/// is a warning otherwise; the checks skip where there is no TPM at all and
/// the key does not need one.
struct TPMDiagnosis {
    static let reachableID = "tpm.reachable"
    static let permissionsID = "tpm.device-permissions"
    static let groupID = "tpm.group"

    let selection: TPMSelection
    /// The device key's backend, nil without a key.
    let keyBackend: KeyBackend?
    /// False when the keystore cannot be read: whether a key needs the TPM is not known.
    let keyKnown: Bool
    let user: DoctorUser
    /// The first TCTI's device node, for a `device:` TCTI.
    let node: TPMDeviceNode?

    init(selection: TPMSelection, keyBackend: KeyBackend?, keyKnown: Bool, user: DoctorUser) {
        self.selection = selection
        self.keyBackend = keyBackend
        self.keyKnown = keyKnown
        self.user = user
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

    func checks() -> [DoctorCheck] {
        [reachable(), devicePermissions(), group()]
    }

    /// A TPM answers a command (GetCapability, as `status` asks it) through the TCTI.
    func reachable() -> DoctorCheck {
        let title = "TPM reachable"
        do {
            let description = try TPMKeyProvisioner.describe(selection)
            return DoctorCheck(Self.reachableID, title, .pass,
                               "a TPM answers at \(description.tcti): \(description.manufacturer), firmware \(description.firmwareVersion)")
        } catch {
            if case .softwareStackMissing = error, !needed {
                return DoctorCheck(Self.reachableID, title, .skip, "cannot ask: tpm2-tss cannot be loaded (see library.tss2-esys)\(keyNeedsNone)")
            }
            if noTPMHere && !needed {
                return DoctorCheck(Self.reachableID, title, .skip, DoctorExplanation(error).detail + keyNeedsNone)
            }
            return DoctorCheck.failed(Self.reachableID, title, error, verdict: problem,
                                      fallbackFix: "check that the TPM (or its resource manager or simulator) is running and that --tcti names it")
        }
    }

    /// The device node exists, is a character device, and this user may open it read-write.
    func devicePermissions() -> DoctorCheck {
        let title = "TPM device permissions"
        guard let node else {
            return DoctorCheck(Self.permissionsID, title, .skip, "the TCTI \(tcti) opens no device node: nothing to check")
        }
        guard node.exists else {
            if !needed { return DoctorCheck(Self.permissionsID, title, .skip, "\(node.path) does not exist: no TPM here\(keyNeedsNone)") }
            return DoctorCheck(Self.permissionsID, title, .fail, "\(node.path) does not exist", fix: node.missingFix)
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

    /// The user is in the group that may open the device (tss): in this session, not only in /etc/group.
    func group() -> DoctorCheck {
        let title = "TPM group membership"
        guard let node else {
            return DoctorCheck(Self.groupID, title, .skip, "the TCTI \(tcti) opens no device node: no group is needed")
        }
        guard node.exists else {
            return DoctorCheck(Self.groupID, title, .skip, "no device node at \(node.path): group membership does not matter here")
        }
        let name = node.groupMayOpen ? node.groupName ?? "tss" : "tss"
        guard let gid = node.groupMayOpen ? node.groupID : getgrnam(name).map({ $0.pointee.gr_gid }) else {
            if node.openable { return DoctorCheck(Self.groupID, title, .pass, "there is no group tss, but \(node.path) opens for you anyway") }
            return DoctorCheck(Self.groupID, title, problem, "there is no group tss on this machine",
                               fix: "sudo apt-get install tpm-udev (it adds group tss and gives it \(node.path)), then sudo usermod -aG tss \(user.shellName) and log in again")
        }
        if user.sessionGroups.contains(gid) {
            return DoctorCheck(Self.groupID, title, .pass, "you are in group \(name)")
        }
        let why = user.uid == 0 ? "as root" : "by its owner or mode"
        if user.isListed(in: gid) {
            if node.openable { return DoctorCheck(Self.groupID, title, .pass, "\(node.path) opens for you \(why) (group \(name) applies from your next login)") }
            return DoctorCheck(Self.groupID, title, problem, "you were added to group \(name) after this login session started: the membership applies from the next login",
                               fix: "log out and back in (or run `newgrp \(name)`)")
        }
        if node.openable {
            return DoctorCheck(Self.groupID, title, .pass, "you are not in group \(name), but \(node.path) opens for you \(why)")
        }
        let missingRule = node.groupMayOpen ? "" : " (and \(node.path) is not group \(name)'s: sudo apt-get install tpm-udev installs the udev rule that makes it so)"
        return DoctorCheck(Self.groupID, title, problem, "you (\(user.described)) are not in group \(name), whose members may open \(node.path)\(missingRule)",
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
