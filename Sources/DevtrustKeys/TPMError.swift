import CTPM2
import DevtrustErrors

/// A TSS2 response code, split into what devtrust needs to explain it.
public struct TPMResponseCode: Equatable, Sendable, CustomStringConvertible {
    public let raw: UInt32

    public init(_ raw: UInt32) { self.raw = raw }

    /// The TSS layer that produced it: 0 the TPM, 7 ESAPI, 10 the TCTI, 11/12 a resource manager.
    public var layer: UInt32 { raw >> 16 }

    /// The TPM's own code with the handle/parameter/session number removed,
    /// when the TPM (or a resource manager relaying it) answered.
    public var tpmCode: UInt32? {
        guard layer == 0 || layer == 12 else { return nil }
        let code = raw & 0xFFFF
        return code & 0x80 != 0 ? (code & 0x3F) | 0x80 : code & 0xFFF
    }

    /// Whether the TPM refused a parameter (a format-one code with its P bit),
    /// not a handle, a session or the TPM's state.
    public var isParameterError: Bool { tpmCode != nil && raw & 0xC0 == 0xC0 }

    /// The TSS's base code (IO error, no connection, ...) for the other layers.
    public var tssBaseCode: UInt32? { tpmCode == nil ? raw & 0xFFFF : nil }

    static let integrity: UInt32 = 0x09F       // TPM2_RC_INTEGRITY
    static let handle: UInt32 = 0x08B          // TPM2_RC_HANDLE
    static let value: UInt32 = 0x084           // TPM2_RC_VALUE
    static let authFail: UInt32 = 0x08E        // TPM2_RC_AUTH_FAIL
    static let badAuth: UInt32 = 0x0A2         // TPM2_RC_BAD_AUTH
    static let lockout: UInt32 = 0x921         // TPM2_RC_LOCKOUT
    static let retry: UInt32 = 0x922           // TPM2_RC_RETRY
    static let objectMemory: UInt32 = 0x902    // TPM2_RC_OBJECT_MEMORY
    static let sessionMemory: UInt32 = 0x903   // TPM2_RC_SESSION_MEMORY
    static let nvSpace: UInt32 = 0x14B         // TPM2_RC_NV_SPACE
    static let nvDefined: UInt32 = 0x14C       // TPM2_RC_NV_DEFINED
    static let hierarchy: UInt32 = 0x085       // TPM2_RC_HIERARCHY (disabled)
    static let ioError: UInt32 = 10            // TSS2_BASE_RC_IO_ERROR
    static let noConnection: UInt32 = 8        // TSS2_BASE_RC_NO_CONNECTION
    static let tryAgain: UInt32 = 9            // TSS2_BASE_RC_TRY_AGAIN
    static let responseAuthFailed: UInt32 = 27 // TSS2_BASE_RC_RSP_AUTH_FAILED
    static let esapiBadValue: UInt32 = 0x7_000B  // TSS2_ESYS_RC_BAD_VALUE

    /// The TSS's own text for the code (Tss2_RC_Decode).
    public var description: String {
        let hex = String(raw, radix: 16)
        guard let tss = try? TSS2Library.load(), let text = tss.pointee.Tss2_RC_Decode(raw) else { return "0x" + hex }
        return "\(String(cString: text)) (0x\(String(repeating: "0", count: max(0, 8 - hex.count)) + hex))"
    }
}

/// Everything that can go wrong with the TPM, in words a user can act on.
/// Every case is a TPM failure (its `classification`).
public enum TPMError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No TPM answers at `tcti`; `reason` says why, `hint` what to do.
    case unreachable(tcti: String, reason: String, hint: String?)
    /// tpm2-tss (the TPM software stack) is not installed, or too old.
    case softwareStackMissing(reason: String)
    /// The TPM stopped answering in the middle of `operation`.
    case connectionLost(operation: String, code: TPMResponseCode)
    /// The key blob is refused: the TPM was cleared, its firmware changed the
    /// storage seed, or the keystore comes from another machine.
    case keyDoesNotLoad(code: TPMResponseCode)
    /// The persistent parent the key file names is gone, and no parent was
    /// recorded at init to recreate it from.
    case parentMissing(handle: UInt32)
    /// The parent recorded at init cannot be made again from its template:
    /// this TPM derives another key from it now (the TPM was cleared, or the
    /// keystore is another machine's). `standardTemplate` false: it was not
    /// devtrust's template, so an unusual one could also be why.
    case storageRootKeyChanged(standardTemplate: Bool)
    /// The parent is gone from its handle (or another object sits there) and
    /// the owner hierarchy has a password, so devtrust cannot make it again;
    /// `command` does, with the password (nil: tpm2-tools cannot make its template).
    case parentNeedsOwner(handle: UInt32, command: String?, replaced: Bool)
    /// The key file names the owner hierarchy (a primary devtrust makes from
    /// the SRK template for each use), the owner hierarchy has a password, and
    /// no persistent copy of that primary sits at devtrust's handles; `command`
    /// makes one (at `freeHandle`, else 0x81000002).
    case primaryNeedsOwner(freeHandle: UInt32?, command: String)
    /// The storage (owner) hierarchy is disabled: no key under it can be used.
    case hierarchyDisabled(operation: String)
    /// The TPM did not run `operation` now (TPM_RC_RETRY): busy, try again.
    case busy(operation: String)
    /// devtrust cannot make its own storage root key (an owner password) and
    /// the storage keys it found are exposed to lockout: `refused` had a
    /// password (that try counted towards lockout), `untried` were not tried
    /// because the lockout counter was `failedTries`, above zero.
    case exposedParentsNotTried(refused: UInt32?, untried: [UInt32], failedTries: UInt32, freeHandle: UInt32?)
    /// devtrust found no storage key it can use, and cannot make one: the
    /// owner hierarchy has a password. `passedOver` says why each was not used.
    case noStorageRootKey(freeHandle: UInt32?, passedOver: [String])
    /// The TPM refused an authorization in a salted session: the key (or its
    /// parent) has a password, or the TPM cannot derive the session's key.
    case authorizationRefused(operation: String)
    /// A response's HMAC (in a session salted to the SRK) does not verify:
    /// something between devtrust and the TPM changed or forged the answer.
    case responseNotAuthentic(operation: String)
    /// The TPM refuses authorizations while in dictionary-attack lockout.
    case lockout
    /// The owner hierarchy has a password (devtrust uses the empty one).
    case ownerAuthorizationRequired(operation: String)
    /// No free slot for a session: something else left sessions loaded in a
    /// TPM that has no resource manager.
    case outOfSessionMemory(operation: String)
    /// No free slot for a transient object: something else left objects loaded
    /// in a TPM that has no resource manager.
    case outOfObjectMemory(operation: String)
    /// The object at `handle`, where devtrust had just loaded (or found) the device key, was another
    /// one by the time it was to sign: another program flushed the key and loaded its own object
    /// there, twice in a row (a TPM without a resource manager). Nothing was signed.
    case keyReplaced(handle: UInt32?)
    /// A key file that is not a usable TSS2 P-256 signing key.
    case unsupportedKey(String)
    case commandFailed(operation: String, code: TPMResponseCode)

    public var description: String {
        switch self {
        case .unreachable:
            return classification.message
        case let .softwareStackMissing(reason):
            return "the TPM software stack (tpm2-tss) cannot be loaded (\(reason)): install the packages "
                + TPMSoftwareStack.packages.dropLast().joined(separator: ", ") + " and " + TPMSoftwareStack.packages.last!
        case let .connectionLost(operation, code):
            return "the TPM stopped answering during \(operation) (\(code)); nothing was changed. Check that the TPM (or its resource manager or simulator) is running, then retry."
        case let .keyDoesNotLoad(code):
            return "the TPM refuses the device key (\(code)): the TPM was cleared or its firmware reset its storage keys, or this keystore comes from another machine. The key is lost: run `devtrust init --force` and register this device again."
        case let .parentMissing(handle):
            return "the TPM has no storage key at \(TPMHandle.format(handle)) any more, the parent the device key was made under: another program removed it, or the TPM was cleared. If it was the standard storage root key, `\(TPMHandle.standardStorageRootKeyCommand(handle))` brings the device key back; if the TPM was cleared, the key is lost: run `devtrust init --force` and register this device again."
        case let .storageRootKeyChanged(standardTemplate):
            let unusual = standardTemplate ? "" : " The parent was not made from devtrust's template, so it may also have been made in a way devtrust cannot repeat: if you know how, making it again at its handle brings the key back."
            return "the TPM cannot make again the storage root key the device key was made under (from the recorded template it derives a key with another name than the one recorded at `devtrust init`): when the TPM was cleared, which destroys every key made in it, or this keystore comes from another machine, the key is lost: run `devtrust init --force` and register this device again.\(unusual)"
        case let .parentNeedsOwner(handle, command, replaced):
            let what = replaced ? "another key sits at \(TPMHandle.format(handle)), where the storage root key the device key was made under was" : "the storage root key the device key was made under is gone from \(TPMHandle.format(handle))"
            let who = replaced ? "whoever knows the password can, once that other key is moved elsewhere, run" : "whoever knows the password can run"
            guard let command else {
                return "\(what), and the owner hierarchy has a password, so devtrust cannot make it again. Unless the TPM was cleared, the device key is not lost: whoever knows the password can make that key again at \(TPMHandle.format(handle)) from the template it was made with (tpm2-tools cannot: it is an unusual one; keystore.json holds its public area, ESAPI's serialization in `tpmParent`); `devtrust token` then works again."
            }
            return "\(what), and the owner hierarchy has a password, so devtrust cannot make it again. Unless the TPM was cleared, the device key is not lost: \(who): \(command); `devtrust token` then works again (the command says so when the TPM cannot make that key any more)."
        case let .primaryNeedsOwner(freeHandle, command):
            return "the key is made under the TPM's standard storage root key, which devtrust makes for each use (the key file names the owner hierarchy, 0x40000001), and the owner hierarchy has a password, so devtrust cannot make it. Whoever knows the password can make that storage root key persistent \(Self.where(freeHandle)): \(command); devtrust then finds it there, and the key works again (unless the TPM was cleared since the key was made: then it is lost, and a command that checks the key's name says so)."
        case let .hierarchyDisabled(operation):
            return "the TPM refused \(operation): its storage (owner) hierarchy is disabled (shEnable is clear), so no key under it can be made or used until it is enabled again; keys made under it work again then. If tpm2_hierarchycontrol disabled it, a restart of the machine (a TPM reset) or `tpm2_hierarchycontrol -C p shEnable set` (where the platform hierarchy is open) enables it; if the firmware disables it, enable it in the firmware's TPM settings."
        case let .busy(operation):
            return "the TPM was busy and did not run \(operation) (TPM_RC_RETRY); nothing was changed: run the command again."
        case let .exposedParentsNotTried(refused, untried, failedTries, freeHandle):
            var what = [String]()
            if let refused { what.append("the storage key at \(TPMHandle.format(refused)) has a password (devtrust uses none), and devtrust's try counted towards the TPM's dictionary-attack lockout, since that key is not exempt") }
            if !untried.isEmpty { what.append("devtrust did not try \(untried.map(TPMHandle.format).joined(separator: ", ")), also exposed to lockout, because the TPM's lockout counter is \(failedTries): each refused try adds one, for every user of the TPM") }
            return "devtrust cannot make its own storage root key (the owner hierarchy has a password), and \(what.joined(separator: "; ")). Whoever knows the owner password can make devtrust's standard storage root key \(Self.where(freeHandle)): \(TPMHandle.standardStorageRootKeyCommand(freeHandle ?? TPMHandle.eccStorageRootKey, ownerPassword: true)); then run `devtrust init` again."
        case let .noStorageRootKey(freeHandle, passedOver):
            return "devtrust found no storage root key it can make its key under (\(passedOver.joined(separator: "; "))). Whoever knows the owner password can make devtrust's standard one \(Self.where(freeHandle)): \(TPMHandle.standardStorageRootKeyCommand(freeHandle ?? TPMHandle.eccStorageRootKey, ownerPassword: true)); then run `devtrust init` again."
        case let .authorizationRefused(operation):
            return "the TPM refused the authorization for \(operation): the key or its parent has a password (devtrust uses none), or something between devtrust and the TPM interferes (where devtrust authorizes in a session salted to the storage root key, that the TPM cannot verify the session also means this is not the TPM that key belongs to). For keys without noDA, each refusal counts towards the TPM's dictionary-attack lockout: find the cause before trying again."
        case let .responseNotAuthentic(operation):
            return "the TPM's answer to \(operation) failed its integrity check (the response HMAC of a session salted to the storage root key does not verify): something between devtrust and the TPM changed or forged it. Nothing was recorded. Check the TCTI (--tcti) and what runs between devtrust and the TPM."
        case .lockout:
            return "the TPM is in dictionary-attack lockout and refuses authorizations; wait for the lockout to expire (see tpm2_getcap properties-variable: TPM2_PT_LOCKOUT_*) or reset it with the lockout password (tpm2_dictionarylockout --clear-lockout)."
        case let .ownerAuthorizationRequired(operation):
            return "the TPM refused \(operation): the owner hierarchy has a password (devtrust uses the empty one). Whoever knows it can create a persistent storage root key for devtrust (\(TPMHandle.standardStorageRootKeyCommand(TPMHandle.storageRootKey, ownerPassword: true))); then run `devtrust init` again"
        case let .outOfSessionMemory(operation):
            return "the TPM has no free session slot for \(operation): another program left sessions loaded. Use the kernel's resource manager (device:/dev/tpmrm0) or tpm2-abrmd, or free them with tpm2_flushcontext -l (loaded sessions) and -s (saved ones)"
        case let .outOfObjectMemory(operation):
            return "the TPM has no free slot for \(operation): another program left objects loaded. Use the kernel's resource manager (device:/dev/tpmrm0) or tpm2-abrmd, or free the slots with tpm2_flushcontext -t (which fails and frees nothing while a hash or HMAC sequence is loaded: then a restart of the TPM, a reboot, frees them)"
        case let .keyReplaced(handle):
            return "another program replaced the device key in the TPM: the object at \(handle.map(TPMHandle.format) ?? "the key's handle"), where devtrust had just loaded the key again, is another one (a TPM without a resource manager lets the programs that share it flush each other's objects). Nothing was signed. Run the command again; if this keeps happening, find the program that flushes other programs' objects (as `tpm2_flushcontext -t` does), or use the TPM through the kernel's resource manager (device:/dev/tpmrm0)."
        case let .unsupportedKey(reason):
            return "not a usable TPM device key: \(reason)"
        case let .commandFailed(operation, code):
            return "the TPM refused \(operation): \(code)"
        }
    }

    /// Translates a failed command's response code into the error a user should
    /// see. `ownerAuthorized`: the command authorizes the owner hierarchy
    /// (CreatePrimary, EvictControl), so a refused authorization is the owner's
    /// password; any other refusal is the object's (or the session's).
    static func from(_ raw: TSS2_RC, operation: String, ownerAuthorized: Bool = false) -> TPMError {
        let code = TPMResponseCode(raw)
        if let base = code.tssBaseCode, [TPMResponseCode.ioError, TPMResponseCode.noConnection, TPMResponseCode.tryAgain].contains(base) {
            return .connectionLost(operation: operation, code: code)
        }
        if code.tssBaseCode == TPMResponseCode.responseAuthFailed { return .responseNotAuthentic(operation: operation) }
        switch code.tpmCode {
        case TPMResponseCode.lockout?: return .lockout
        case TPMResponseCode.objectMemory?: return .outOfObjectMemory(operation: operation)
        case TPMResponseCode.sessionMemory?: return .outOfSessionMemory(operation: operation)
        case TPMResponseCode.hierarchy?: return .hierarchyDisabled(operation: operation)
        case TPMResponseCode.retry?: return .busy(operation: operation)
        case TPMResponseCode.badAuth?, TPMResponseCode.authFail?:
            return ownerAuthorized ? .ownerAuthorizationRequired(operation: operation) : .authorizationRefused(operation: operation)
        default: return .commandFailed(operation: operation, code: code)
        }
    }
}

public enum TPMHandle {
    /// The conventional persistent handle of the storage root key.
    public static let storageRootKey: UInt32 = 0x8100_0001
    /// The TCG provisioning guidance's handle for the ECC P-256 SRK: devtrust's
    /// second choice, when 0x81000001 holds a key it should not use.
    public static let eccStorageRootKey: UInt32 = 0x8100_0002
    /// TPM2_RH_OWNER: in a key file, "a primary key created from the SRK template".
    public static let owner: UInt32 = 0x4000_0001

    /// The tpm2-tools commands that make devtrust's standard storage root key
    /// persistent at `handle`: the same template, so the same key, every time.
    /// Without a resource manager the tools leave what they load in the TPM's
    /// few slots: the last step flushes them.
    public static func standardStorageRootKeyCommand(_ handle: UInt32, ownerPassword: Bool = false) -> String {
        let password = ownerPassword ? " -P PASSWORD" : ""
        return "tpm2_createprimary -C o\(password) -g sha256 -G ecc256:aes128cfb -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt' -c srk.ctx && tpm2_evictcontrol -C o\(password) -c srk.ctx \(format(handle)) && tpm2_flushcontext -t"
    }

    /// Whether `handle` is a persistent object's (0x81xxxxxx), not a transient one's.
    public static func isPersistent(_ handle: UInt32) -> Bool { handle >> 24 == 0x81 }

    public static func format(_ handle: UInt32) -> String {
        let hex = String(handle, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }
}

extension TPMError: ClassifiedError {
    /// A TPM failure. Only an unreachable TPM's hint is set apart (the caller gives it); the other
    /// cases' advice is part of their sentences, as `--json` has always shown them.
    public var classification: ErrorClassification {
        if case let .unreachable(tcti, reason, hint) = self {
            return ErrorClassification(.tpm, summary: "no TPM at \(tcti) (\(reason))", hint: hint.map { ErrorHint($0, joinedBy: ": ") })
        }
        return ErrorClassification(.tpm, summary: description)
    }
}

extension TPMError {
    /// Where the standard SRK can go: the free handle, or one that has to be freed first.
    fileprivate static func `where`(_ freeHandle: UInt32?) -> String {
        freeHandle.map { "at \(TPMHandle.format($0))" } ?? "at 0x81000002, once the key there is moved elsewhere"
    }

    /// An answer that may have been forged, or an authorization the TPM refused
    /// in an authenticated session: never a reason to quietly fall back to a
    /// software key.
    public var isEvidenceOfTampering: Bool {
        switch self {
        case .responseNotAuthentic, .authorizationRefused: return true
        default: return false
        }
    }
}
