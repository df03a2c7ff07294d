import DevtrustEncoding
import DevtrustKeys

/// keystore.json's fields, each list written once, in the order they are
/// written: the encoder writes these, the decoder refuses any other, and
/// `status --json` shows the registrations' and the sign-ins' (less the
/// keystore's own bookkeeping). keystore/schema/ is their specification.
public enum KeystoreField {
    /// The top-level object.
    public enum Manifest: String, CaseIterable, Sendable {
        case version, key, registrations, tpmPersistentHandles, signIns, formerRegistrations

        /// The first keystore version that has the field.
        var since: Int64 { self == .signIns || self == .formerRegistrations ? 2 : 1 }
    }

    public enum Key: String, CaseIterable, Sendable {
        case backend, file, fingerprint, createdAt, tpmParent, tcti
    }

    public enum Registration: String, CaseIterable, Sendable {
        case registrationId, server, flowType, keyFingerprint, registeredAt, uid, account
    }

    public enum FormerRegistration: String, CaseIterable, Sendable {
        case registrationId, uid, account
    }

    public enum SignIn: String, CaseIterable, Sendable {
        case id, server, discovery, clientId, scope, method, file, signedInAt

        /// The keystore's bookkeeping (the record's id, its tokens' file), not a fact about the sign-in.
        public var isBookkeeping: Bool { self == .id || self == .file }
    }

    /// An object of `fields`, in their order; a field whose value is nil is left out.
    static func object<Field: RawRepresentable>(_ fields: [Field], _ value: (Field) -> JSONValue?) -> JSONObject where Field.RawValue == String {
        var object = JSONObject()
        for field in fields { object[field.rawValue] = value(field) }
        return object
    }
}

extension KeyRecord {
    /// The record as keystore.json holds it.
    public var keystoreObject: JSONObject {
        KeystoreField.object(KeystoreField.Key.allCases) { field in
            switch field {
            case .backend: .string(backend.rawValue)
            case .file: .string(file)
            case .fingerprint: .string(fingerprint)
            case .createdAt: .string(createdAt)
            case .tpmParent: tpmParent.map { .string(Base64.encode($0)) }
            case .tcti: tcti.map { .string($0) }
            }
        }
    }
}

extension RegistrationRecord {
    /// The record as keystore.json holds it (and `status --json` shows it).
    public var keystoreObject: JSONObject {
        KeystoreField.object(KeystoreField.Registration.allCases) { field in
            switch field {
            case .registrationId: .string(registrationId)
            case .server: .string(server)
            case .flowType: .string(flowType)
            case .keyFingerprint: .string(keyFingerprint)
            case .registeredAt: .string(registeredAt)
            case .uid: uid.map { .integer($0) }
            case .account: account.map { .string($0) }
            }
        }
    }
}

extension FormerRegistration {
    /// The record as keystore.json holds it.
    public var keystoreObject: JSONObject {
        KeystoreField.object(KeystoreField.FormerRegistration.allCases) { field in
            switch field {
            case .registrationId: .string(registrationId)
            case .uid: .integer(uid)
            case .account: account.map { .string($0) }
            }
        }
    }
}

extension SignInRecord {
    /// The record's `fields` as keystore.json holds them (all of them by default).
    public func keystoreObject(fields: [KeystoreField.SignIn] = KeystoreField.SignIn.allCases) -> JSONObject {
        KeystoreField.object(fields) { field in
            switch field {
            case .id: .string(id)
            case .server: server.map { .string($0) }
            case .discovery: discovery.map { .string($0) }
            case .clientId: .string(clientId)
            case .scope: .string(scope)
            case .method: .string(method)
            case .file: .string(file)
            case .signedInAt: .string(signedInAt)
            }
        }
    }
}

/// Reads by field rather than by name.
extension JSONObjectReader {
    func string<Field: RawRepresentable>(_ field: Field) throws(JSONFieldError) -> String where Field.RawValue == String {
        try string(field.rawValue)
    }

    func optionalString<Field: RawRepresentable>(_ field: Field) throws(JSONFieldError) -> String? where Field.RawValue == String {
        try optionalString(field.rawValue)
    }

    func fieldPath<Field: RawRepresentable>(_ field: Field) -> String where Field.RawValue == String {
        fieldPath(field.rawValue)
    }

    func rejectUnknownFields<Field: RawRepresentable>(_ fields: [Field]) throws(JSONFieldError) where Field.RawValue == String {
        try rejectUnknownFields(known: fields.map(\.rawValue))
    }
}
