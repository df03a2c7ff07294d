import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
import DevtrustKeystore
import DevtrustTerminal

/// Whether the device key loads and signs, as `status` reports it (and a front end that watches
/// the device would): for a TPM key, in a child process with a deadline (`BoundedProbes`), what
/// dictionary-attack lockout could stop it through, and what the TPM backend did on its own.
package struct KeyHealth {
    package var loads = false
    package var problem: String?
    /// Why the key does not load: `status` exits with its code once it has said everything else.
    package var error: (any Error)?
    package var parentHandle: UInt32?
    /// For a TPM key: what dictionary-attack lockout could stop it through.
    package var lockoutExposure: TPMDeviceKey.LockoutExposure?
    /// What the TPM backend did on its own while checking (a recreated SRK, say).
    package var notices = [String]()
    /// The TPM did not answer within the deadline.
    package var timedOut = false

    package init() {}

    package init(error: any Error) {
        problem = ErrorReport.from(error).message
        self.error = error
    }

    /// As a child process sends it (`BoundedProbes`): the error as its report.
    package var json: JSONValue {
        var object: JSONObject = ["loads": .bool(loads), "notices": .array(notices.map(JSONValue.string))]
        if let problem { object["problem"] = .string(problem) }
        if let error { object["error"] = ForwardedError(ErrorClassification(of: error)).json }
        if let parentHandle { object["parentHandle"] = .integer(Int64(parentHandle)) }
        switch lockoutExposure {
        case .none?: object["lockout"] = .string("none")
        case .key?: object["lockout"] = .string("key")
        case let .parent(handle)?: object["lockout"] = .integer(Int64(handle))
        case nil: break
        }
        return .object(object)
    }

    package init?(json: JSONValue) {
        guard let object = json.objectValue, let loads = object["loads"]?.boolValue else { return nil }
        self.loads = loads
        problem = object["problem"]?.stringValue
        error = object["error"].flatMap(ForwardedError.init(json:))
        parentHandle = object["parentHandle"]?.int64Value.flatMap { UInt32(exactly: $0) }
        switch object["lockout"] {
        case .string("none")?: lockoutExposure = TPMDeviceKey.LockoutExposure.none
        case .string("key")?: lockoutExposure = .key
        case let value?: lockoutExposure = value.int64Value.flatMap { UInt32(exactly: $0) }.map { .parent(handle: $0) }
        case nil: lockoutExposure = nil
        }
        notices = object["notices"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// Why the key is exposed to lockout and what to do, or nil when it is not.
    package static func lockoutAdvice(_ exposure: TPMDeviceKey.LockoutExposure?) -> String? {
        let why: String
        switch exposure {
        case .key?: why = "the key was made without noDA (by an earlier devtrust, or elsewhere and imported)"
        case let .parent(handle)?: why = "the storage key it loads under, at \(TPMHandle.format(handle)), was made without noDA (by another program)"
        case .none?, nil: return nil
        }
        return why + ", so any program that can reach the TPM can stop it from signing by putting the TPM in dictionary-attack lockout (a few wrong passwords on any key); re-create it with `devtrust init --force --backend tpm` (devtrust then uses a storage key exempt from lockout), and register again"
    }

    /// How long checking a TPM key may take, and asking the TPM what it is: a TCTI that accepts
    /// and never answers would make the TSS wait for ever (`BoundedProbes`).
    static let keySeconds = SigningDeadline.probeKeySeconds
    static let describeSeconds = SigningDeadline.probeDescribeSeconds

    /// Loads the key and has it sign (for a TPM key, in the TPM), as `status` reports it.
    package static func keyHealth(_ store: DeviceStore) -> KeyHealth {
        var result = KeyHealth()
        do {
            // Loaded once: what lockout could stop it through is read from its files, even when the TPM then fails.
            let device = try store.loadKey()
            let tpmKey = device.key as? TPMDeviceKey
            result.lockoutExposure = tpmKey?.lockoutExposure
            try store.check(device)
            result.loads = true
            result.parentHandle = tpmKey?.keyFile.parent
        } catch {
            result.problem = ErrorReport.from(error).message
            result.error = error
        }
        result.notices = store.tpmNotices.drain()
        return result
    }

    /// `keyHealth` in a child process with a deadline: a TPM that never answers is a TPM error, not a hang.
    package static func boundedKeyHealth(_ store: DeviceStore, selection: TPMSelection, probes: BoundedProbes) -> KeyHealth {
        switch probes.run(seconds: keySeconds, { keyHealth(store).json }) {
        case let .finished(value):
            if let health = KeyHealth(json: value) { return health }
            return KeyHealth(error: ForwardedError(ErrorClassification(.tpm, summary: "checking the key gave no result")))
        case .timedOut, .notStarted:
            let error = TPMError.unreachable(tcti: selection.candidates.joined(separator: " or "), reason: "no answer within \(Int(keySeconds)) s",
                                            hint: "check that the TPM (or its resource manager or simulator) is working")
            var health = KeyHealth(error: error)
            health.timedOut = true
            return health
        case let .failed(reason):
            return KeyHealth(error: ForwardedError(ErrorClassification(.tpm, summary: "checking the key ended without a result (\(reason))")))
        }
    }

    /// What the TPM says it is, asked in a child process with a deadline; not asked again when it did not answer the key's commands.
    package static func describeTPM(_ selection: TPMSelection, probes: BoundedProbes, skip: Bool) -> Result<TPMDescription, any Error> {
        let tcti = selection.candidates.joined(separator: " or ")
        let unanswered = TPMError.unreachable(tcti: tcti, reason: "no answer within \(Int(skip ? keySeconds : describeSeconds)) s", hint: nil)
        guard !skip else { return .failure(unanswered) }
        let outcome = probes.run(seconds: describeSeconds) {
            switch Result(catching: { try TPMKeyProvisioner.describe(selection) }) {
            case let .success(description):
                return .object(["tcti": .string(description.tcti), "manufacturer": .string(description.manufacturer),
                                "firmwareVersion": .string(description.firmwareVersion)])
            case let .failure(error):
                return .object(["problem": .string("\(error)")])
            }
        }
        switch outcome {
        case let .finished(value):
            let object = value.objectValue ?? [:]
            if let tcti = object["tcti"]?.stringValue, let manufacturer = object["manufacturer"]?.stringValue,
               let firmware = object["firmwareVersion"]?.stringValue {
                return .success(TPMDescription(tcti: tcti, manufacturer: manufacturer, firmwareVersion: firmware))
            }
            return .failure(ForwardedError(ErrorClassification(.tpm, summary: object["problem"]?.stringValue ?? "no answer")))
        case .timedOut, .notStarted:
            return .failure(unanswered)
        case let .failed(reason):
            return .failure(ForwardedError(ErrorClassification(.tpm, summary: "asking the TPM ended without an answer (\(reason))")))
        }
    }
}
