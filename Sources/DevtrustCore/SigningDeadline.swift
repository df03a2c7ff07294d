import CDeadline
import DevtrustKeys

/// The bounds on the TPM's time, with every constant of them here. This one: loading the device key and signing with it end within a
/// deadline, or the process ends with prepared last words. A TPM (or a resource manager or
/// simulator) that accepts a connection and never answers would otherwise hold a script's
/// `$(devtrust token)`, or a browser's navigation, for ever. Arming costs a few system calls,
/// nothing a token would notice, and asks nothing of the terminal (the words are made before;
/// whether they go out in colour is decided only when the deadline passes: `CDeadline`).
public struct SigningDeadline: Sendable {
    /// A command that a script or a sign-in waits on (`token`, `device-data`, `sign-challenge`,
    /// `dpop-proof`, a DPoP sign-in's proofs): far beyond what loading a key and signing take,
    /// even on a slow TPM that must first make its storage root key again. Its error goes to stderr.
    public static let commandSeconds: UInt32 = 30
    /// The native messaging host: a browser's navigation waits on the token (the extension gives
    /// up on the host after 10 s too: HOST_TIMEOUT_MILLISECONDS in browser/background.js). The
    /// host then answers that it did not finish, on stdout where the browser reads, and ends.
    public static let nativeHostSeconds: UInt32 = 10
    /// The TPM's time bounds in the checks that must outlive a TPM that never answers (`doctor`,
    /// `status`): loading the key and signing with it (several TPM commands, perhaps a storage
    /// root key to make again), and asking the TPM what it is (a few GetCapability commands).
    /// They bound a child process that is killed at the deadline (DevtrustDoctor's `BoundedProbes`),
    /// not this process: a hung TPM is then a failed check, and the report still comes out.
    public static let probeKeySeconds = 10.0
    public static let probeDescribeSeconds = 5.0
    /// Where each writes its last words: a command its error on stderr, the host its reply on stdout.
    static let commandOutput: Int32 = 2
    static let nativeHostOutput: Int32 = 1

    public let seconds: UInt32
    /// The file descriptor the last words go to.
    public let output: Int32
    /// What `output` gets when the deadline passes...
    let lastWords: [UInt8]
    /// ...or this instead, when `output` is a terminal then (colour); nil: `lastWords` everywhere.
    let lastWordsOnTerminal: [UInt8]?
    /// The process's exit status then (the CLI names its exit codes: `ExitCode`).
    let exitStatus: Int32

    init(seconds: UInt32, output: Int32, lastWords: [UInt8], lastWordsOnTerminal: [UInt8]? = nil, exitStatus: Int32) {
        self.seconds = seconds
        self.output = output
        self.lastWords = lastWords
        self.lastWordsOnTerminal = lastWordsOnTerminal
        self.exitStatus = exitStatus
    }

    /// A command's deadline: `commandSeconds`, its error on stderr.
    public static func command(error: [UInt8], errorOnTerminal: [UInt8]?, exitStatus: Int32) -> SigningDeadline {
        SigningDeadline(seconds: commandSeconds, output: commandOutput, lastWords: error, lastWordsOnTerminal: errorOnTerminal, exitStatus: exitStatus)
    }

    /// The native host's deadline: `nativeHostSeconds`, its reply (a framed message) on stdout.
    public static func nativeHost(reply: [UInt8], exitStatus: Int32) -> SigningDeadline {
        SigningDeadline(seconds: nativeHostSeconds, output: nativeHostOutput, lastWords: reply, exitStatus: exitStatus)
    }

    /// `body` (loading the key and signing) under the deadline, which ends with it, however it ends:
    /// the output written after it is not bounded (a slow reader of stdout is no TPM failure), and a
    /// command that fails before it signs leaves no alarm to end the process later (in-process tests).
    public func bounding<Result>(_ body: () throws -> Result) rethrows -> Result {
        let onTerminal = lastWordsOnTerminal ?? []
        _ = lastWords.withUnsafeBufferPointer { words in
            onTerminal.withUnsafeBufferPointer { coloured in
                devtrust_deadline_arm(seconds, output, words.baseAddress, words.count, coloured.baseAddress, coloured.count, exitStatus)
            }
        }
        defer { devtrust_deadline_disarm() }
        return try body()
    }

    /// The key with each signature under the deadline: for signatures made among network requests
    /// (DPoP proofs of a sign-in or a refresh), where the deadline must bound the TPM and not the
    /// server's answers.
    public func bounding(_ key: any DeviceKey) -> any DeviceKey {
        DeadlineBoundKey(key: key, deadline: self)
    }
}

/// A device key whose signatures are each bounded by a deadline (`SigningDeadline.bounding(_:)`).
struct DeadlineBoundKey: DeviceKey {
    let key: any DeviceKey
    let deadline: SigningDeadline

    var backend: KeyBackend { key.backend }
    var publicKey: P256PublicKey { key.publicKey }

    func sign(digest: SHA256Digest) throws -> ECDSASignature {
        try deadline.bounding { try key.sign(digest: digest) }
    }
}
