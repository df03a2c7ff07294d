import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustFlow
import DevtrustHTTP
import DevtrustSignIn
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore

/// The one place that turns any error into what the user reads and the exit code.
struct ErrorReport: Sendable, Equatable {
    let exitCode: ExitCode
    /// The whole text the user reads: what failed, then (when there is one) the hint.
    let message: String
    /// What failed: `message` without the hint (`--json` prints the two apart).
    let summary: String
    /// The rest of `message` after `summary`: the hint with what joins it on, or "".
    let hintPart: String
    /// What to do next, where the error sets it apart from what failed; `message` ends with it
    /// (but for the closing parenthesis of a usage error's pointer to help).
    let hint: String?
    /// Shown with --verbose: OpenSSL's error queue and the like.
    let detail: String?

    init(_ exitCode: ExitCode, _ message: String, detail: String? = nil) {
        self.init(exitCode, summary: message, hint: nil, joinedBy: "", detail: detail)
    }

    /// `summary`, `joiner`, `hint` and `closing` make the message.
    init(_ exitCode: ExitCode, summary: String, hint: String?, joinedBy joiner: String, closing: String = "", detail: String? = nil) {
        self.exitCode = exitCode
        self.summary = summary
        self.hint = hint
        self.hintPart = hint.map { joiner + $0 + closing } ?? ""
        self.message = summary + hintPart
        self.detail = detail
    }

    /// A report as it was made elsewhere (a child process's): its parts as they were.
    init(_ exitCode: ExitCode, summary: String, hint: String?, hintPart: String, detail: String?) {
        self.exitCode = exitCode
        self.summary = summary
        self.hint = hint
        self.hintPart = hintPart
        self.message = summary + hintPart
        self.detail = detail
    }

    /// A message whose last part, after the last `separator`, says what to do next
    /// (the error types word their messages so); no hint without the separator.
    static func splitting(_ exitCode: ExitCode, _ message: String, at separator: String) -> ErrorReport {
        let bytes = Array(message.utf8), marker = Array(separator.utf8)
        // The separators are ASCII: a match starts and ends on a character boundary.
        guard bytes.count > marker.count,
              let start = (0..<(bytes.count - marker.count)).reversed().first(where: { bytes[$0..<($0 + marker.count)].elementsEqual(marker) }) else {
            return ErrorReport(exitCode, message)
        }
        return ErrorReport(exitCode, summary: String(decoding: bytes[..<start], as: UTF8.self),
                           hint: String(decoding: bytes[(start + marker.count)...], as: UTF8.self), joinedBy: separator)
    }

    /// The object `--json` prints on stderr: `{"error":{"message","exitCode","hint"}}`,
    /// `hint` null when the error sets none apart; `detail` only with --verbose.
    func json(verbose: Bool) -> JSONValue {
        var error: JSONObject = ["message": .string(summary), "exitCode": .integer(Int64(exitCode.rawValue)), "hint": hint.map { .string($0) } ?? .null]
        if verbose, let detail, !detail.isEmpty { error["detail"] = .string(detail) }
        return .object(["error": .object(error)])
    }

    /// What stderr gets for it: the lines for people (what failed in `style`'s error colour, the hint
    /// after it plain), or with --json the one JSON object on one line, never coloured.
    func text(style: TerminalStyle, verbose: Bool, json: Bool) -> String {
        if json { return JSONWriter.string(self.json(verbose: verbose)) + "\n" }
        let lines = humanLines(verbose: verbose)
        return style.error(lines.failed) + lines.rest
    }

    /// The lines for people in two parts, each printable: what failed (`devtrust: error: ...`,
    /// the part a style colours), and the rest (the hint, a detail line with verbose).
    func humanLines(verbose: Bool) -> (failed: String, rest: String) {
        var rest = TerminalText.printable(hintPart) + "\n"
        if verbose, let detail, !detail.isEmpty {
            rest += "devtrust: detail: \(TerminalText.printable(detail))\n"
        }
        return ("devtrust: error: " + TerminalText.printable(summary), rest)
    }

    static func from(_ error: any Error) -> ErrorReport {
        switch error {
        case let error as ForwardedError:
            return error.report
        case let error as UsageError:
            return ErrorReport(.usage, summary: error.message, hint: error.command.map { "see `devtrust help \($0)`" }, joinedBy: " (", closing: ")")
        case let error as ConfigError:
            return ErrorReport(.usage, error.description)
        case let error as KeystoreError:
            // Told apart where the error makes them, not by searching the text: a path may hold ". ".
            return ErrorReport(.keystore, summary: error.summary, hint: error.hint, joinedBy: error.separator)
        case let error as DeviceError:
            // Each message is "what failed; what to do".
            let exitCode: ExitCode
            switch error {
            case .keyChangedDuringRegistration, .keyExistsWithOtherBackend:
                exitCode = .failure
            case .notSignedIn, .noDeviceKey, .notRegistered, .registrationForOtherKey, .tokenGoesElsewhere, .dpopKeyChanged, .notDPoPBound:
                exitCode = .noKeyOrNotRegistered
            case .ambiguousSignIn, .ambiguousRegistration, .importedKeyBackend:
                exitCode = .usage
            case .refreshRefused:
                exitCode = .serverRefused
            case let .refreshFailed(_, _, mayPass):
                exitCode = mayPass ? .network : .serverRefused
            }
            return .splitting(exitCode, error.description, at: "; ")
        case let error as HTTPError:
            switch error {
            case .invalidURL, .insecureURL: return ErrorReport(.usage, error.description)
            case .interrupted: return ErrorReport(.failure, error.description)
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
            // The server's words on one line: a line break in them must not start a line of devtrust's own.
            return ErrorReport(.serverRefused, OAuthError(error: TerminalText.oneLine(error.error), errorDescription: error.errorDescription.map(TerminalText.oneLine),
                                                          httpStatus: error.httpStatus, bodyless: error.bodyless, grantType: error.grantType).description)
        case let error as Interrupted:
            return ErrorReport(.failure, error.description)
        case let error as DeviceCodeFailure:
            return ErrorReport(.serverRefused, error.description)
        case let error as CIBAFailure:
            return ErrorReport(.serverRefused, error.description)
        case let error as SignInUnsupportedError:
            return ErrorReport(.serverRefused, error.description)
        case let error as OAuthProtocolError:
            // Its message may quote the server (an issuer, an endpoint): on one line too.
            return ErrorReport(.network, TerminalText.oneLine(error.description))
        case let error as LoopbackListenerError:
            if case .handoffReused = error { return ErrorReport(.failure, error.description) }
            return ErrorReport(.network, error.description)
        case let error as TPMError:
            if case let .unreachable(tcti, reason, hint?) = error {
                return ErrorReport(.tpm, summary: "no TPM at \(tcti) (\(reason))", hint: hint, joinedBy: ": ")
            }
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

/// An error a child process reported (`BoundedProbes`), as `ErrorReport` worded it there:
/// the same message, hint and exit code as the error itself gives.
struct ForwardedError: Error, CustomStringConvertible {
    let report: ErrorReport

    init(_ report: ErrorReport) {
        self.report = report
    }

    var description: String { report.message }

    var json: JSONValue {
        .object(["exitCode": .integer(Int64(report.exitCode.rawValue)), "summary": .string(report.summary),
                 "hint": report.hint.map(JSONValue.string) ?? .null, "hintPart": .string(report.hintPart),
                 "detail": report.detail.map(JSONValue.string) ?? .null])
    }

    init?(json: JSONValue) {
        guard let object = json.objectValue, let code = object["exitCode"]?.int64Value.flatMap({ Int32(exactly: $0) }).flatMap(ExitCode.init(rawValue:)),
              let summary = object["summary"]?.stringValue, let hintPart = object["hintPart"]?.stringValue else { return nil }
        report = ErrorReport(code, summary: summary, hint: object["hint"]?.stringValue, hintPart: hintPart, detail: object["detail"]?.stringValue)
    }
}
