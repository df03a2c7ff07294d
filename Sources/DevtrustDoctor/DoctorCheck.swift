import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore
import DevtrustTerminal

/// How one `doctor` check came out. Only `fail` makes doctor exit 1: `warn`
/// is something that limits devtrust or will bite later, `skip` a check that
/// does not apply here (no TPM checks for a software key on a machine without one).
package enum DoctorVerdict: String, Sendable, CaseIterable {
    case pass, warn, fail, skip

    /// The mark a line of human output starts with.
    package var mark: String {
        switch self {
        case .pass: "[pass]"
        case .warn: "[warn]"
        case .fail: "[FAIL]"
        case .skip: "[skip]"
        }
    }
}

/// One check's outcome: a stable id for scripts, what was found, and what to
/// do about it (nil on a pass, and on a skip that needs nothing done).
package struct DoctorCheck: Sendable, Equatable {
    package let id: String
    package let title: String
    package let verdict: DoctorVerdict
    package let detail: String
    package let fix: String?

    package init(_ id: String, _ title: String, _ verdict: DoctorVerdict, _ detail: String, fix: String? = nil) {
        self.id = id
        self.title = title
        self.verdict = verdict
        self.detail = detail
        self.fix = verdict == .pass ? nil : fix
    }

    /// A check that could not be made because `error` was thrown: what the
    /// error says failed, and the fix it names (`fallbackFix` when it names none).
    package static func failed(_ id: String, _ title: String, _ error: any Error, verdict: DoctorVerdict = .fail, fallbackFix: String) -> DoctorCheck {
        let explained = DoctorExplanation(error)
        return DoctorCheck(id, title, verdict, explained.detail, fix: explained.fix ?? fallbackFix)
    }

    /// The same check with another verdict, detail or fix.
    package func with(verdict: DoctorVerdict? = nil, detail: String? = nil, fix: String?? = nil) -> DoctorCheck {
        DoctorCheck(id, title, verdict ?? self.verdict, detail ?? self.detail, fix: fix ?? self.fix)
    }

    package var json: JSONValue {
        .object(["id": .string(id), "title": .string(title), "verdict": .string(verdict.rawValue),
                 "detail": .string(detail), "fix": fix.map { .string($0) } ?? .null])
    }

    /// A check as `json` wrote it (from a probe's child process); nil for anything else.
    package init?(json: JSONValue) {
        guard let object = json.objectValue, let id = object["id"]?.stringValue, let title = object["title"]?.stringValue,
              let verdict = object["verdict"]?.stringValue.flatMap(DoctorVerdict.init(rawValue:)),
              let detail = object["detail"]?.stringValue else { return nil }
        self.init(id, title, verdict, detail, fix: object["fix"]?.stringValue)
    }
}

/// Sentences and clauses of a check's detail joined: after a full stop the next
/// part starts a sentence, otherwise a semicolon joins them.
package enum DoctorText {
    package static func joined(_ parts: [String]) -> String {
        var text = ""
        for part in parts where !part.isEmpty {
            if text.isEmpty {
                text = part
            } else if text.hasSuffix(".") {
                text += " " + part.prefix(1).uppercased() + part.dropFirst()
            } else {
                text += "; " + part
            }
        }
        return text
    }

    /// `a`, `a and b`, `a, b and c`.
    package static func listed(_ items: [String]) -> String {
        items.count > 1 ? items.dropLast().joined(separator: ", ") + " and " + items.last! : items.joined()
    }

    /// A URL as doctor shows it: without a user name or password (as every HTTP message shows it).
    package static func shown(_ url: String) -> String {
        TransportPolicy.redacted(url, keepingQuery: true)
    }
}

/// What `devtrust init --force` would lose: said whenever doctor gives it as the fix.
package struct KeyLoss: Sendable {
    package let fingerprint: String
    package let servers: [String]

    package init(fingerprint: String, servers: [String]) {
        self.fingerprint = fingerprint
        self.servers = servers
    }

    package init?(_ state: KeystoreState?) {
        guard let state, let key = state.key else { return nil }
        self.init(fingerprint: key.fingerprint, servers: state.registrations.map(\.server))
    }

    package var fix: String {
        let shown = DoctorText.listed(servers.map(DoctorText.shown))
        let registrations = servers.isEmpty ? "it has no registrations to lose"
            : servers.count == 1 ? "its registration with \(shown) is forgotten: register again"
            : "its \(servers.count) registrations (with \(shown)) are forgotten: register again with each"
        return "the device key (fingerprint \(fingerprint)) cannot be recovered: `devtrust init --force` makes a new one; \(registrations)"
    }
}

/// An error taken apart into what failed and what to do, from the parts the
/// error keeps apart (never by searching its text: a path may hold ". ").
/// `destroysKey`: the fix replaces the device key, which the error says is lost.
package struct DoctorExplanation {
    package let detail: String
    package let fix: String?
    package let destroysKey: Bool

    package init(detail: String, fix: String?, destroysKey: Bool = false) {
        self.detail = detail
        self.fix = fix
        self.destroysKey = destroysKey
    }

    /// - Parameter loss: what a new key would lose, for the errors that say the key is lost.
    package init(_ error: any Error, loss: KeyLoss? = nil) {
        if let error = error as? TPMError {
            self = Self.tpm(error, loss: loss)
            return
        }
        if let error = error as? KeySelfTestFailure {
            switch error.backend {
            case .tpm:
                self.init(detail: "the TPM's signature does not verify with the device key's public key: the TPM (or something between devtrust and the TPM) is not the one the key was made in",
                          fix: "check the TCTI (--tcti, DEVTRUST_TCTI): it must reach the TPM the key was made in")
            case .software:
                self.init(detail: "the device key's signature does not verify with its public key: the key file is damaged",
                          fix: loss?.fix ?? "`devtrust init --force` makes a new device key (register again)", destroysKey: true)
            }
            return
        }
        if let error = error as? KeystoreError {
            var destroys = false
            if case .keyFileMissing = error { destroys = true }
            if case let .corrupt(path, _) = error, KeystoreError.FileKind(path: path) == .key { destroys = true }
            if destroys, let loss {
                self.init(detail: error.summary, fix: "unless you have a good copy of that file (put it back), " + loss.fix, destroysKey: true)
            } else {
                self.init(detail: error.summary, fix: error.hint.map { Self.sentence($0) }, destroysKey: destroys)
            }
            return
        }
        let report = ErrorReport.from(error)
        self.init(detail: report.hint?.isEmpty == false ? report.summary : report.message, fix: report.hint.flatMap { $0.isEmpty ? nil : $0 })
    }

    /// A hint written as a sentence, as a fix: without its closing full stop.
    private static func sentence(_ hint: String) -> String {
        hint.hasSuffix(".") ? String(hint.dropLast()) : hint
    }

    /// The TPM's errors, each with what failed and its fix apart.
    private static func tpm(_ error: TPMError, loss: KeyLoss?) -> DoctorExplanation {
        let lost = loss?.fix ?? "the device key cannot be recovered: `devtrust init --force` makes a new one (register again)"
        let running = "check that the TPM (or its resource manager or simulator) is running and that the TCTI (--tcti, DEVTRUST_TCTI) names it"
        switch error {
        case let .unreachable(tcti, reason, hint):
            return DoctorExplanation(detail: "no TPM at \(tcti) (\(reason))", fix: hint ?? running)
        case let .softwareStackMissing(reason):
            return DoctorExplanation(detail: "the TPM software stack (tpm2-tss) cannot be loaded (\(reason))",
                                     fix: "sudo apt-get install " + TPMSoftwareStack.packages.joined(separator: " "))
        case let .connectionLost(operation, code):
            return DoctorExplanation(detail: "the TPM stopped answering during \(operation) (\(code))", fix: running)
        case let .keyDoesNotLoad(code):
            return DoctorExplanation(detail: "the TPM refuses the device key (\(code)): the TPM was cleared or its firmware reset its storage keys, or this keystore comes from another machine",
                                     fix: lost, destroysKey: true)
        case let .parentMissing(handle):
            return DoctorExplanation(detail: "the TPM has no storage key at \(TPMHandle.format(handle)) any more, the parent the device key was made under: another program removed it, or the TPM was cleared",
                                     fix: "if it was the standard storage root key, this brings the device key back: \(TPMHandle.standardStorageRootKeyCommand(handle)); only if the TPM was cleared is the key lost (then: \(lost))")
        case .storageRootKeyChanged:
            return DoctorExplanation(detail: String(error.description.prefix(while: { $0 != ":" })) + ": the TPM was cleared (which destroys every key made in it), or this keystore comes from another machine",
                                     fix: lost, destroysKey: true)
        case .parentNeedsOwner, .primaryNeedsOwner, .ownerAuthorizationRequired, .exposedParentsNotTried, .noStorageRootKey:
            // Each of these says in one text what happened and the commands that need the owner password; none gives up the key.
            return DoctorExplanation(detail: error.description, fix: "whoever knows the TPM's owner password runs the commands the detail gives; then run `devtrust doctor` again")
        case .hierarchyDisabled:
            return DoctorExplanation(detail: error.description, fix: "enable the storage hierarchy as the detail says; then run `devtrust doctor` again")
        case .authorizationRefused, .responseNotAuthentic:
            return DoctorExplanation(detail: error.description, fix: "check the TCTI (--tcti, DEVTRUST_TCTI) and what runs between devtrust and the TPM")
        case .lockout:
            return DoctorExplanation(detail: "the TPM is in dictionary-attack lockout and refuses authorizations",
                                     fix: "wait for the lockout to expire (tpm2_getcap properties-variable: TPM2_PT_LOCKOUT_*), or reset it with the lockout password: tpm2_dictionarylockout --clear-lockout")
        case let .outOfSessionMemory(operation):
            return DoctorExplanation(detail: "the TPM has no free session slot for \(operation): another program left sessions loaded",
                                     fix: "use the kernel's resource manager (device:/dev/tpmrm0) or tpm2-abrmd, or free them with tpm2_flushcontext -l (loaded sessions) and -s (saved ones)")
        case let .outOfObjectMemory(operation):
            return DoctorExplanation(detail: "the TPM has no free slot for \(operation): another program left objects loaded",
                                     fix: "use the kernel's resource manager (device:/dev/tpmrm0) or tpm2-abrmd, or free the slots with tpm2_flushcontext -t (which fails and frees nothing while a hash or HMAC sequence is loaded: then a restart of the TPM, a reboot, frees them)")
        case let .busy(operation):
            return DoctorExplanation(detail: "the TPM was busy and did not run \(operation) (TPM_RC_RETRY)", fix: "run `devtrust doctor` again")
        case .keyReplaced:
            return DoctorExplanation(detail: error.description, fix: "run `devtrust doctor` again")
        case let .unsupportedKey(reason):
            return DoctorExplanation(detail: "not a usable TPM device key: \(reason)", fix: lost, destroysKey: true)
        case let .commandFailed(operation, code):
            return DoctorExplanation(detail: "the TPM refused \(operation): \(code)", fix: running)
        }
    }
}

/// Every check's outcome, as doctor prints them.
package struct DoctorReport {
    package let checks: [DoctorCheck]

    package var failed: [DoctorCheck] { checks.filter { $0.verdict == .fail } }
    package var ok: Bool { failed.isEmpty }

    /// `12 checks: 9 pass, 1 warn, 1 fail, 1 skip`.
    package var summary: String {
        let counts = DoctorVerdict.allCases.map { verdict in "\(checks.filter { $0.verdict == verdict }.count) \(verdict.rawValue)" }
        return "\(checks.count) checks: " + counts.joined(separator: ", ")
    }

    /// `{"ok": bool, "checks": [{"id", "title", "verdict", "detail", "fix"}]}`.
    package var json: JSONValue {
        .object(["ok": .bool(ok), "checks": .array(checks.map(\.json))])
    }
}
