import Glibc

/// Which TPM to talk to, chosen as tpm2-tools chooses: `--tcti`, then
/// `DEVTRUST_TCTI`, `TPM2TOOLS_TCTI`, `TSS2_TCTI`; by default the kernel's
/// resource manager `device:/dev/tpmrm0`, then the `tabrmd` daemon.
public struct TPMSelection: Equatable, Sendable {
    public static let defaultCandidates = ["device:/dev/tpmrm0", "tabrmd"]
    /// The TCTI modules tpm2-tss and tpm2-abrmd provide (Debian 12: libtss2-tcti-NAME0).
    public static let knownTCTINames = ["device", "tabrmd", "swtpm", "mssim", "cmd", "pcap"]

    /// TCTI configurations to try in order; the first that opens wins.
    public let candidates: [String]
    /// Whether the user named the TCTI (then only that one is tried).
    public let isExplicit: Bool

    public init(explicit: String?, environment: [String: String]) {
        for value in [explicit, environment["DEVTRUST_TCTI"], environment["TPM2TOOLS_TCTI"], environment["TSS2_TCTI"]] {
            if let value, !value.isEmpty {
                candidates = [value]
                isExplicit = true
                return
            }
        }
        candidates = Self.defaultCandidates
        isExplicit = false
    }

    public init(tcti: String) {
        candidates = [tcti]
        isExplicit = true
    }

    /// The TCTIs a keystore may record for its key: those that only open a
    /// device or a socket. `cmd` runs a program, `pcap` writes a file, and a
    /// name with a `/` or `.so` is a library path: a keystore that named one
    /// would make devtrust run or load what the keystore says.
    public static let recordableTCTINames = ["device", "tabrmd", "swtpm", "mssim"]

    /// Whether `configuration` may be recorded with the key and used from the
    /// keystore again: a recordable name, a `device` under /dev, printable
    /// ASCII, at most 256 characters.
    public static func isRecordable(_ configuration: String) -> Bool {
        guard configuration.utf8.count <= 256, configuration.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        let parts = configuration.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        guard recordableTCTINames.contains(name) else { return false }
        if name == "device", parts.count > 1, !parts[1].isEmpty {
            return parts[1].hasPrefix("/dev/") && !parts[1].split(separator: "/").contains("..")
        }
        return true
    }

    /// The TPM for a key whose keystore recorded `recorded`: the user's choice
    /// (`--tcti`, a TCTI variable) wins, then the recorded one, then the default.
    public func forKey(recordedTCTI recorded: String?) -> TPMSelection {
        guard !isExplicit, let recorded, Self.isRecordable(recorded) else { return self }
        return TPMSelection(tcti: recorded)
    }

    /// For a `device:PATH` TCTI, why the device cannot be opened, checked
    /// before the TSS tries (its own error would only say "IO error").
    static func deviceProblem(_ configuration: String) -> (reason: String, hint: String?)? {
        let parts = configuration.split(separator: ":", maxSplits: 1)
        guard parts.first == "device" else { return nil }
        let path = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : "/dev/tpm0"
        if access(path, F_OK) != 0 {
            if let direct = directDevice(besideResourceManager: path) {
                return ("no such device", "the TPM at \(direct) has no kernel resource manager; start tpm2-abrmd (--tcti tabrmd), or use --tcti device:\(direct) (one process at a time): \(path) is missing (a kernel older than 4.12?)")
            }
            return ("no such device", "this machine has no TPM, or it is disabled in the firmware settings")
        }
        if access(path, R_OK | W_OK) != 0 {
            return ("permission denied", accessHint(path))
        }
        return nil
    }

    /// For a missing `DIR/tpmrmN`: `DIR/tpmN` when it exists (a TPM whose kernel has no resource manager).
    public static func directDevice(besideResourceManager path: String) -> String? {
        guard let slash = path.lastIndex(of: "/"), path[path.index(after: slash)...].hasPrefix("tpmrm") else { return nil }
        let name = path[path.index(after: slash)...]
        let direct = String(path[...slash]) + "tpm" + name.dropFirst("tpmrm".count)
        return access(direct, F_OK) == 0 ? direct : nil
    }

    /// How the user gets read-write access to a device node: the group that may open it
    /// (its group, when that group has rw and is not root), else tpm-udev's rule for group tss.
    static func accessHint(_ path: String) -> String {
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o060 == 0o060, info.st_gid != 0, let group = getgrgid(info.st_gid) {
            let name = String(cString: group.pointee.gr_name)
            return "add yourself to group \(name) (sudo usermod -aG \(name) $USER, then log in again)"
        }
        return "add yourself to group tss (sudo usermod -aG tss $USER, then log in again), once tpm-udev is installed: its udev rule makes the device read-write for group tss, which its mode does not give now"
    }

    /// The words for a TCTI name that is none of tpm2-tss's (a mistyped one is no package to install).
    public static func unknownTCTI(_ name: String) -> (reason: String, hint: String) {
        let known = knownTCTINames
        return ("unknown TCTI \"\(name)\"", "the TCTIs are " + known.dropLast().joined(separator: ", ") + " and " + known.last!
                    + ", e.g. --tcti device:/dev/tpmrm0 or --tcti swtpm:host=localhost,port=2321")
    }

    /// `configuration` with a known TCTI's name put as its module's file name
    /// (`swtpm:host=h` -> `libtss2-tcti-swtpm.so.0:host=h`), nil for another.
    /// tctildr first gives the dynamic loader the bare name, which it looks for
    /// in every library directory (two dozen failed opens on Debian), then
    /// this file name, found in the loader's cache at once: the same module,
    /// given the same configuration.
    static func moduleFileConfiguration(_ configuration: String) -> String? {
        let parts = configuration.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard knownTCTINames.contains(String(parts[0])) else { return nil }
        return "libtss2-tcti-\(parts[0]).so.0" + (parts.count > 1 ? ":" + parts[1] : "")
    }

    /// Whether `name` (a configuration's TCTI name) is a library path or file name rather than a TCTI's name.
    public static func namesLibrary(_ name: String) -> Bool {
        name.contains("/") || name.split(separator: ".").contains("so")
    }
}
