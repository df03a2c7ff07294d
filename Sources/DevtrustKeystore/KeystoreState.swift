import DevtrustEncoding
import DevtrustKeys

/// The device key as the keystore records it; the key material is in `file`.
public struct KeyRecord: Equatable, Sendable {
    public var backend: KeyBackend
    /// A file name inside the keystore directory (never a path).
    public var file: String
    /// RFC 7638 thumbprint of the public key.
    public var fingerprint: String
    public var createdAt: String
    /// For a TPM key under a persistent parent: ESAPI's serialization of that
    /// parent (Esys_TR_Serialize), so that signing needs no ReadPublic.
    public var tpmParent: [UInt8]?
    /// For a TPM key: the TCTI `init` was told to use (`--tcti` or a TCTI
    /// variable), which later commands use unless told otherwise. Only a
    /// configuration `TPMSelection.isRecordable` accepts.
    public var tcti: String?

    public init(backend: KeyBackend, file: String, fingerprint: String, createdAt: String, tpmParent: [UInt8]? = nil, tcti: String? = nil) {
        self.backend = backend
        self.file = file
        self.fingerprint = fingerprint
        self.createdAt = createdAt
        self.tpmParent = tpmParent
        self.tcti = tcti
    }

    /// The file name devtrust gives a key: one per key, so a new key never
    /// overwrites the file the current manifest names.
    public static func fileName(fingerprint: String) -> String {
        "key-\(fingerprint.prefix(16)).pem"
    }
}

/// A completed Device Registration: the device's id at one server.
public struct RegistrationRecord: Equatable, Sendable {
    /// The server's registrationId: the `deviceId` header of device tokens.
    public var registrationId: String
    /// The server base URL registration ran against.
    public var server: String
    public var flowType: String
    /// Fingerprint of the key that was registered.
    public var keyFingerprint: String
    public var registeredAt: String
    /// The user the registration belongs to, in a keystore that registers several (the system
    /// agent's machine keystore: each user's registrations are theirs). nil: the keystore
    /// owner's, as every registration of a keystore of one's own is.
    public var uid: UInt32?
    /// The account that had `uid` when the agent recorded the registration (`AccountName`): a uid
    /// given again to a new account after `userdel` is not the departed user's, and neither are their
    /// registrations. nil: any account of the uid's (records of agents before it was kept).
    public var account: String?

    public init(registrationId: String, server: String, flowType: String, keyFingerprint: String, registeredAt: String, uid: UInt32? = nil,
                account: String? = nil) {
        self.registrationId = registrationId
        self.server = server
        self.flowType = flowType
        self.keyFingerprint = keyFingerprint
        self.registeredAt = registeredAt
        self.uid = uid
        self.account = account
    }

    /// The uid the registration belongs to in a keystore owned by `keystoreOwner`.
    public func owner(keystoreOwner: UInt32) -> UInt32 {
        uid ?? keystoreOwner
    }

    /// The record as its user is shown it: without whose it is (the uid and account), which only
    /// the keystore's owner sees.
    public var withoutHolder: RegistrationRecord {
        var shown = self
        shown.uid = nil
        shown.account = nil
        return shown
    }

    /// Whether the registration is `holder`'s in a keystore owned by `keystoreOwner`.
    public func belongs(to holder: RegistrationHolder, keystoreOwner: UInt32) -> Bool {
        holder.holds(uid: owner(keystoreOwner: keystoreOwner), account: account)
    }
}

/// Whose registrations: a uid, and the account that has it now when that is known (the agent's
/// clients); nil: whichever account had the uid (a keystore of one's own, root naming a uid).
public struct RegistrationHolder: Hashable, Sendable {
    public var uid: UInt32
    public var account: String?

    public init(uid: UInt32, account: String? = nil) {
        self.uid = uid
        self.account = account
    }

    /// Whether a record of `uid`, made by `account` (nil: not known), is this holder's.
    public func holds(uid: UInt32, account: String?) -> Bool {
        guard uid == self.uid else { return false }
        guard let account, let mine = self.account else { return true }
        return account == mine
    }
}

/// An account's name as a registration records it: the name itself when it is short and plain (every
/// name `useradd` makes by default), else `sha256:` and the name's SHA-256 in hex (a name cannot hold
/// a `:`, the user database's separator). Either way a few dozen bytes, whatever the user database says.
public enum AccountName {
    public static let maximumPlainLength = 64

    public static func recorded(_ name: String) -> String {
        let bytes = Array(name.utf8)
        if isPlain(name) { return name }
        return "sha256:" + Hex.encode(SHA256.hash(bytes).bytes)
    }

    /// A recorded name: plain, or `sha256:` and 64 hex digits.
    public static func isRecorded(_ text: String) -> Bool {
        if text.hasPrefix("sha256:") {
            let digest = text.dropFirst("sha256:".count)
            return digest.count == 64 && digest.allSatisfy { $0.isHexDigit && !$0.isUppercase }
        }
        return isPlain(text)
    }

    private static func isPlain(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maximumPlainLength && name.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f && $0 != ":" }
    }
}

/// A registration the agent forgot (its user's `reset`, a replacement, root forgetting a uid's): its id
/// stays its user's, so that no other user records it and mints tokens the server takes as that user's
/// device, while the key it was made with is the keystore's.
public struct FormerRegistration: Equatable, Sendable {
    /// How many a keystore keeps (keystore.v2.schema.json's maxItems): the store drops the oldest of
    /// whoever holds the most past it, and the reader refuses more.
    public static let maximumKept = 512

    public var registrationId: String
    public var uid: UInt32
    public var account: String?

    public init(registrationId: String, uid: UInt32, account: String?) {
        self.registrationId = registrationId
        self.uid = uid
        self.account = account
    }

    public init(_ record: RegistrationRecord, keystoreOwner: UInt32) {
        self.init(registrationId: record.registrationId, uid: record.owner(keystoreOwner: keystoreOwner), account: record.account)
    }
}

/// A stored sign-in: whom it is with, and the file that holds its tokens.
public struct SignInRecord: Equatable, Sendable {
    /// Stable for (server or discovery URL, client id): a new sign-in replaces the old.
    public var id: String
    /// The WSO2-style base URL (`--server`), if the sign-in used one; for a
    /// `--discovery` sign-in, the issuer its document names (none in records
    /// of earlier versions).
    public var server: String?
    /// The OpenID discovery document URL (`--discovery`), if the sign-in used one.
    public var discovery: String?
    public var clientId: String
    public var scope: String
    /// app-native, device-code or authorization-code.
    public var method: String
    /// A file name inside the keystore: the tokens (secret, mode 0600).
    public var file: String
    public var signedInAt: String

    public init(id: String, server: String?, discovery: String?, clientId: String, scope: String, method: String, file: String, signedInAt: String) {
        self.id = id
        self.server = server
        self.discovery = discovery
        self.clientId = clientId
        self.scope = scope
        self.method = method
        self.file = file
        self.signedInAt = signedInAt
    }

    /// The file name devtrust gives a sign-in's tokens.
    public static func fileName(id: String) -> String { "signin-\(id).json" }
}

/// Everything `keystore.json` says.
public struct KeystoreState: Equatable, Sendable {
    public var key: KeyRecord?
    public var registrations: [RegistrationRecord]
    /// TPM persistent handles devtrust itself made (an SRK it persisted), so
    /// that `reset` removes those and never anything it did not create.
    public var tpmPersistentHandles: [UInt32]
    /// Stored sign-ins (version 2); their tokens are in their own files.
    public var signIns: [SignInRecord]
    /// The registrations that were forgotten or replaced, oldest first, while the key is the same
    /// (`FormerRegistration`; version 2, written only when there are any).
    public var formerRegistrations: [FormerRegistration]

    public init(key: KeyRecord? = nil, registrations: [RegistrationRecord] = [], tpmPersistentHandles: [UInt32] = [], signIns: [SignInRecord] = [],
                formerRegistrations: [FormerRegistration] = []) {
        self.key = key
        self.registrations = registrations
        self.tpmPersistentHandles = tpmPersistentHandles
        self.signIns = signIns
        self.formerRegistrations = formerRegistrations
    }

    public static let empty = KeystoreState()

    /// This state as the user `uid` sees it in a keystore owned by `keystoreOwner`: their own
    /// registrations only (the sign-ins are the keystore owner's, so none for another user).
    public func belonging(to holder: RegistrationHolder, keystoreOwner: UInt32) -> KeystoreState {
        var own = self
        own.registrations = registrations.filter { $0.belongs(to: holder, keystoreOwner: keystoreOwner) }
        if holder.uid != keystoreOwner { own.signIns = [] }
        return own
    }
}
