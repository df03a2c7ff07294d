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

    /// For a `device:PATH` TCTI, why the device cannot be opened, checked
    /// before the TSS tries (its own error would only say "IO error").
    static func deviceProblem(_ configuration: String) -> (reason: String, hint: String?)? {
        let parts = configuration.split(separator: ":", maxSplits: 1)
        guard parts.first == "device" else { return nil }
        let path = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : "/dev/tpm0"
        if access(path, F_OK) != 0 {
            if path.hasSuffix("/tpmrm0") && access(String(path.dropLast(7)) + "/tpm0", F_OK) == 0 {
                return ("no such device", "the TPM at /dev/tpm0 has no kernel resource manager; start tpm2-abrmd (--tcti tabrmd), or use --tcti device:/dev/tpm0 (one process at a time)")
            }
            return ("no such device", "this machine has no TPM, or it is disabled in the firmware settings")
        }
        if access(path, R_OK | W_OK) != 0 {
            return ("permission denied", "add yourself to group tss (sudo usermod -aG tss $USER, then log in again)")
        }
        return nil
    }
}
