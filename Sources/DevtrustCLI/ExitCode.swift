import DevtrustErrors

/// The exit codes of the CLI contract.
public enum ExitCode: Int32, Sendable {
    case success = 0
    /// A failure; for `verify`, an invalid signature or token.
    case failure = 1
    /// Unknown option, missing argument, bad value, unusable configuration.
    case usage = 2
    /// No device key, or the device is not registered where it must be.
    case noKeyOrNotRegistered = 3
    /// The server refused: a flow error, a rejected grant.
    case serverRefused = 4
    /// Network or TLS failure, timeout, a server that does not speak the protocol.
    case network = 5
    /// TPM unreachable, key not loadable, permission.
    case tpm = 6
    /// Keystore unsafe, corrupt or locked.
    case keystore = 7

    /// The few words the help overview gives each code.
    var shortMeaning: String {
        switch self {
        case .success: "ok"
        case .failure: "failure/invalid"
        case .usage: "usage"
        case .noKeyOrNotRegistered: "no key or not registered"
        case .serverRefused: "server refused"
        case .network: "network"
        case .tpm: "TPM"
        case .keystore: "keystore"
        }
    }
}

extension ExitCode: CaseIterable {}

extension ExitCode {
    /// The contract's code for an error of `category`: one per category of the contract's table.
    init(_ category: ErrorCategory) {
        switch category {
        case .usage, .configuration: self = .usage
        case .noDeviceKey, .notRegistered, .notPermitted: self = .noKeyOrNotRegistered
        case .serverRefused, .oauthError, .approvalExpired, .approvalDenied, .unsupported: self = .serverRefused
        case .network, .protocolViolation: self = .network
        case .tpm: self = .tpm
        case .keystore: self = .keystore
        case .interrupted, .failure: self = .failure
        }
    }
}
