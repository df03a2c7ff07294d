import CProcessHardening
import DevtrustKeys

/// A bound on loading the device key and signing with it. A TPM (or a resource manager or
/// simulator) that accepts a connection and never answers would otherwise hold a script's
/// `$(devtrust token)` for ever: after `seconds`, the error a TPM failure gets is written
/// to stderr and the process exits 6. Arming costs a few system calls, nothing a token
/// would notice.
struct KeyUseDeadline {
    /// Far beyond what loading a key and signing take, even on a slow TPM that must first
    /// make its storage root key again.
    static let seconds: UInt32 = 30

    /// What stderr gets when the deadline passes while doing `what`: made before, as a signal
    /// handler can only write it.
    static func lastWords(_ context: CommandContext, _ what: String) -> [UInt8] {
        let report = ErrorReport(.tpm, summary: "the TPM did not answer within \(seconds) s (\(what))",
                                 hint: "check that the TPM, its resource manager or the simulator is working (`devtrust doctor` checks it), then try again",
                                 joinedBy: ": ")
        return Array(DevtrustCommandLine.errorText(report, style: context.style, verbose: false, json: context.json).utf8)
    }

    /// `body` (loading the key and signing) under the deadline, which ends with it, however it ends:
    /// the output written after it is not bounded (a slow reader of stdout is no TPM failure), and a
    /// command that fails before it signs leaves no alarm to end the process later (in-process tests).
    static func bounding<Result>(_ context: CommandContext, _ what: String, _ body: () throws -> Result) rethrows -> Result {
        try bounding(lastWords: lastWords(context, what), body)
    }

    static func bounding<Result>(lastWords: [UInt8], _ body: () throws -> Result) rethrows -> Result {
        _ = lastWords.withUnsafeBufferPointer { devtrust_arm_watchdog_writing(seconds, 2, $0.baseAddress, $0.count, ExitCode.tpm.rawValue) }
        defer { devtrust_disarm_watchdog() }
        return try body()
    }
}

/// The device key with each signature under the deadline: for signatures made among network
/// requests (DPoP proofs of a sign-in or a refresh), where the deadline must bound the TPM and
/// not the server's answers.
struct DeadlineBoundKey: DeviceKey {
    let key: any DeviceKey
    let lastWords: [UInt8]

    var backend: KeyBackend { key.backend }
    var publicKey: P256PublicKey { key.publicKey }

    func sign(digest: SHA256Digest) throws -> ECDSASignature {
        try KeyUseDeadline.bounding(lastWords: lastWords) { try key.sign(digest: digest) }
    }
}
