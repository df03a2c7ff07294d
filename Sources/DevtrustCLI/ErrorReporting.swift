import DevtrustConfig
import DevtrustDevice
import DevtrustFlow
import DevtrustHTTP
import DevtrustSignIn
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore

/// The one place that turns any error into what the user reads and the exit code.
struct ErrorReport {
    let exitCode: ExitCode
    let message: String
    /// Shown with --verbose: OpenSSL's error queue and the like.
    let detail: String?

    init(_ exitCode: ExitCode, _ message: String, detail: String? = nil) {
        self.exitCode = exitCode
        self.message = message
        self.detail = detail
    }

    static func from(_ error: any Error) -> ErrorReport {
        switch error {
        case let error as UsageError:
            let hint = error.command.map { " (see `devtrust help \($0)`)" } ?? ""
            return ErrorReport(.usage, error.message + hint)
        case let error as ConfigError:
            return ErrorReport(.usage, error.description)
        case let error as KeystoreError:
            return ErrorReport(.keystore, error.description)
        case let error as DeviceError:
            switch error {
            case .keyChangedDuringRegistration:
                return ErrorReport(.failure, error.description)
            case .notSignedIn:
                return ErrorReport(.noKeyOrNotRegistered, error.description)
            case .ambiguousSignIn:
                return ErrorReport(.usage, error.description)
            case .refreshRefused:
                return ErrorReport(.serverRefused, error.description)
            case let .refreshFailed(_, _, mayPass):
                return ErrorReport(mayPass ? .network : .serverRefused, error.description)
            case .noDeviceKey, .notRegistered, .registrationForOtherKey:
                return ErrorReport(.noKeyOrNotRegistered, error.description)
            case .ambiguousRegistration:
                return ErrorReport(.usage, error.description)
            case .keyExistsWithOtherBackend:
                return ErrorReport(.failure, error.description)
            case .importedKeyBackend:
                return ErrorReport(.usage, error.description)
            }
        case let error as HTTPError:
            switch error {
            case .invalidURL, .insecureURL: return ErrorReport(.usage, error.description)
            default: return ErrorReport(.network, error.description)
            }
        case let error as FlowServerError:
            return ErrorReport(.serverRefused, error.description)
        case let error as FlowUnsupportedError:
            return ErrorReport(.serverRefused, error.description)
        case let error as FlowProtocolError:
            return ErrorReport(.network, error.description)
        case let error as MissingFlowInputsError:
            return ErrorReport(.usage, error.description)
        case let error as OAuthError:
            return ErrorReport(.serverRefused, error.description)
        case let error as Interrupted:
            return ErrorReport(.failure, error.description)
        case let error as DeviceCodeFailure:
            return ErrorReport(.serverRefused, error.description)
        case let error as SignInUnsupportedError:
            return ErrorReport(.serverRefused, error.description)
        case let error as OAuthProtocolError:
            return ErrorReport(.network, error.description)
        case let error as LoopbackListenerError:
            return ErrorReport(.network, error.description)
        case let error as TPMError:
            return ErrorReport(.tpm, error.description)
        case let error as KeySelfTestFailure:
            return ErrorReport(error.backend == .tpm ? .tpm : .keystore, error.description)
        case let error as KeyFileError:
            return ErrorReport(.usage, error.description)
        case let error as CLIError:
            switch error {
            case let .invalid(reason): return ErrorReport(.failure, "invalid: " + reason)
            case let .failure(message): return ErrorReport(.failure, message)
            }
        case let error as VerificationFailure:
            return ErrorReport(.failure, "invalid: \(error)")
        case let error as OpenSSLError:
            return ErrorReport(.failure, "a cryptographic operation failed (\(error.operation)); this is a bug or a broken OpenSSL installation, please report it",
                               detail: error.detail)
        default:
            return ErrorReport(.failure, "unexpected error: \(error)")
        }
    }
}
