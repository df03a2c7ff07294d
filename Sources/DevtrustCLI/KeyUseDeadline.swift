import CProcessHardening

/// A bound on loading the device key and signing with it. A TPM (or a resource manager or
/// simulator) that accepts a connection and never answers would otherwise hold a script's
/// `$(devtrust token)` for ever: after `seconds`, the error a TPM failure gets is written
/// to stderr and the process exits 6. Arming costs a few system calls, nothing a token
/// would notice.
struct KeyUseDeadline {
    /// Far beyond what loading a key and signing take, even on a slow TPM that must first
    /// make its storage root key again.
    static let seconds: UInt32 = 30

    /// `body` (loading the key and signing) under the deadline, which ends with it, however it ends:
    /// the output written after it is not bounded (a slow reader of stdout is no TPM failure), and a
    /// command that fails before it signs leaves no alarm to end the process later (in-process tests).
    static func bounding<Result>(_ context: CommandContext, _ what: String, _ body: () throws -> Result) rethrows -> Result {
        let report = ErrorReport(.tpm, summary: "the TPM did not answer within \(seconds) s (\(what))",
                                 hint: "check that the TPM, its resource manager or the simulator is working (`devtrust doctor` checks it), then try again",
                                 joinedBy: ": ")
        let text = Array(DevtrustCommandLine.errorText(report, style: context.style, verbose: false, json: context.json).utf8)
        _ = text.withUnsafeBufferPointer { devtrust_arm_watchdog_writing(seconds, 2, $0.baseAddress, $0.count, ExitCode.tpm.rawValue) }
        defer { devtrust_disarm_watchdog() }
        return try body()
    }
}
