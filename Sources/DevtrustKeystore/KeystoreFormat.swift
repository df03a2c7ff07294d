import DevtrustEncoding
import DevtrustKeys

/// `keystore.json`, versioned. keystore/README.md is the specification and
/// keystore/schema/ the JSON Schema of each version.
///
/// A devtrust reads every version up to `currentVersion` and writes only the
/// current one (so the first change after an upgrade migrates the file); it
/// refuses a newer version rather than drop fields it does not know.
public enum KeystoreFormat {
    public static let currentVersion: Int64 = 2
    public static let manifestName = "keystore.json"

    public static func encode(_ state: KeystoreState) -> [UInt8] {
        let document = KeystoreField.object(KeystoreField.Manifest.allCases) { field -> JSONValue? in
            switch field {
            case .version: .integer(currentVersion)
            case .key: state.key.map { .object($0.keystoreObject) } ?? .null
            case .registrations: .array(state.registrations.map { .object($0.keystoreObject) })
            case .tpmPersistentHandles: .array(state.tpmPersistentHandles.map { .string(TPMHandle.format($0)) })
            case .signIns: .array(state.signIns.map { .object($0.keystoreObject()) })
            // Only when there are any: every keystore of one's own stays as it was.
            case .formerRegistrations: state.formerRegistrations.isEmpty ? nil : .array(state.formerRegistrations.map { .object($0.keystoreObject) })
            }
        }
        return Array((JSONWriter.pretty(.object(document)) + "\n").utf8)
    }

    public static func decode(_ bytes: [UInt8], path: String) throws(KeystoreError) -> KeystoreState {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw .corrupt(path: path, detail: "not valid JSON (\(error))")
        }
        do {
            let reader = try JSONObjectReader(document, path: "")
            let version = try reader.int("version")
            guard version <= currentVersion else {
                throw KeystoreError.unsupportedVersion(path: path, found: version, supported: currentVersion)
            }
            guard version >= 1 else {
                throw JSONFieldError(path: "version", kind: .invalidValue("there is no keystore version \(version)"))
            }
            // Version 1 had no sign-ins; reading it as version 2 with none is the migration.
            return try decode(reader, version: version)
        } catch let error as KeystoreError {
            throw error
        } catch let error as JSONFieldError {
            throw .corrupt(path: path, detail: error.description)
        } catch {
            throw .corrupt(path: path, detail: "\(error)")
        }
    }

    private static func decode(_ reader: JSONObjectReader, version: Int64) throws -> KeystoreState {
        typealias Manifest = KeystoreField.Manifest
        try reader.rejectUnknownFields(Manifest.allCases.filter { $0.since <= version })
        var state = KeystoreState()
        if let key = try reader.optionalObject(Manifest.key.rawValue) {
            typealias Field = KeystoreField.Key
            try key.rejectUnknownFields(Field.allCases)
            let backendName = try key.string(Field.backend)
            guard let backend = KeyBackend(rawValue: backendName) else {
                throw JSONFieldError(path: key.fieldPath(Field.backend), kind: .invalidValue("unknown backend \"\(backendName)\" (known: software, tpm)"))
            }
            let file = try key.string(Field.file)
            guard isPlainFileName(file) else {
                throw JSONFieldError(path: key.fieldPath(Field.file), kind: .invalidValue("must be a file name inside the keystore, not \"\(file)\""))
            }
            var tpmParent: [UInt8]?
            if let text = try key.optionalString(Field.tpmParent) {
                guard backend == .tpm, let bytes = try? Base64.decode(text, padding: .required), !bytes.isEmpty else {
                    throw JSONFieldError(path: key.fieldPath(Field.tpmParent), kind: .invalidValue("must be standard base64, and only on a tpm key"))
                }
                tpmParent = bytes
            }
            // A recorded TCTI is a library devtrust loads and a configuration it hands
            // to it: only the allow-listed ones that open a device or a socket.
            let tcti = try key.optionalString(Field.tcti)
            if let tcti, backend != .tpm || !TPMSelection.isRecordable(tcti) {
                let names = TPMSelection.recordableTCTINames.joined(separator: ", ")
                throw JSONFieldError(path: key.fieldPath(Field.tcti), kind: .invalidValue("must be a TCTI configuration of \(names) (device under /dev), and only on a tpm key"))
            }
            state.key = KeyRecord(backend: backend, file: file, fingerprint: try key.string(Field.fingerprint),
                                  createdAt: try key.string(Field.createdAt), tpmParent: tpmParent, tcti: tcti)
        }
        for (index, element) in try reader.array(Manifest.registrations.rawValue).enumerated() {
            typealias Field = KeystoreField.Registration
            let record = try JSONObjectReader(element, path: "\(Manifest.registrations.rawValue)[\(index)]")
            try record.rejectUnknownFields(Field.allCases)
            // A registration's user (added within version 2, written only when set): an older devtrust
            // refuses the field rather than take another user's registration for its own.
            let uid = try uid(record, Field.uid, version: version)
            let account = try account(record, Field.account, uid: uid)
            // Not empty, as the schema says: forgetting one would write a former registration this refuses.
            let registrationID = try record.string(Field.registrationId)
            guard !registrationID.isEmpty else {
                throw JSONFieldError(path: record.fieldPath(Field.registrationId), kind: .invalidValue("must not be empty"))
            }
            state.registrations.append(RegistrationRecord(
                registrationId: registrationID,
                server: try record.string(Field.server),
                flowType: try record.string(Field.flowType),
                keyFingerprint: try record.string(Field.keyFingerprint),
                registeredAt: try record.string(Field.registeredAt),
                uid: uid,
                account: account))
        }
        // Added within version 2, like `uid`: an older devtrust refuses the file rather than forget whose ids they were.
        if reader.object[Manifest.formerRegistrations.rawValue] != nil {
            guard version >= 2 else {
                throw JSONFieldError(path: Manifest.formerRegistrations.rawValue, kind: .invalidValue("is version 2's"))
            }
            let formers = try reader.array(Manifest.formerRegistrations.rawValue)
            guard formers.count <= FormerRegistration.maximumKept else {
                throw JSONFieldError(path: Manifest.formerRegistrations.rawValue, kind: .invalidValue("holds \(formers.count), more than the \(FormerRegistration.maximumKept) a keystore keeps"))
            }
            for (index, element) in formers.enumerated() {
                typealias Field = KeystoreField.FormerRegistration
                let record = try JSONObjectReader(element, path: "\(Manifest.formerRegistrations.rawValue)[\(index)]")
                try record.rejectUnknownFields(Field.allCases)
                guard let uid = try uid(record, Field.uid, version: version) else {
                    throw JSONFieldError(path: record.fieldPath(Field.uid), kind: .missingRequiredField)
                }
                let registrationID = try record.string(Field.registrationId)
                guard !registrationID.isEmpty else {
                    throw JSONFieldError(path: record.fieldPath(Field.registrationId), kind: .invalidValue("must not be empty"))
                }
                state.formerRegistrations.append(FormerRegistration(registrationId: registrationID, uid: uid,
                                                                    account: try account(record, Field.account, uid: uid)))
            }
        }
        if state.key == nil && !state.registrations.isEmpty {
            throw JSONFieldError(path: Manifest.registrations.rawValue, kind: .invalidValue("registrations are recorded but there is no key"))
        }
        if version >= Manifest.signIns.since {
            for (index, element) in try reader.array(Manifest.signIns.rawValue).enumerated() {
                typealias Field = KeystoreField.SignIn
                let record = try JSONObjectReader(element, path: "\(Manifest.signIns.rawValue)[\(index)]")
                try record.rejectUnknownFields(Field.allCases)
                let file = try record.string(Field.file)
                guard isPlainFileName(file), file.hasPrefix("signin-") else {
                    throw JSONFieldError(path: record.fieldPath(Field.file), kind: .invalidValue("must be a signin-*.json file name inside the keystore"))
                }
                let server = try record.optionalString(Field.server)
                let discovery = try record.optionalString(Field.discovery)
                guard server != nil || discovery != nil else {
                    throw JSONFieldError(path: record.fieldPath(Field.server), kind: .invalidValue("a sign-in needs a server or a discovery URL"))
                }
                state.signIns.append(SignInRecord(
                    id: try record.string(Field.id), server: server, discovery: discovery, clientId: try record.string(Field.clientId),
                    scope: try record.string(Field.scope), method: try record.string(Field.method), file: file,
                    signedInAt: try record.string(Field.signedInAt)))
            }
        }
        if reader.object[Manifest.tpmPersistentHandles.rawValue] != nil {
            for (index, element) in try reader.array(Manifest.tpmPersistentHandles.rawValue).enumerated() {
                guard let text = element.stringValue, let handle = parseHandle(text) else {
                    throw JSONFieldError(path: "\(Manifest.tpmPersistentHandles.rawValue)[\(index)]", kind: .invalidValue("must be a handle such as \"0x81000001\""))
                }
                state.tpmPersistentHandles.append(handle)
            }
        }
        return state
    }

    /// A record's user (added within version 2, written only when set): an older devtrust refuses the
    /// field rather than take another user's registration for its own.
    private static func uid<Field: RawRepresentable>(_ record: JSONObjectReader, _ field: Field, version: Int64) throws -> UInt32? where Field.RawValue == String {
        guard let value = record.object[field.rawValue] else { return nil }
        guard version >= 2, let number = value.int64Value, let uid = UInt32(exactly: number) else {
            throw JSONFieldError(path: record.fieldPath(field), kind: .invalidValue("must be a uid, 0 to 4294967295 (version 2 only)"))
        }
        return uid
    }

    /// The account that had a record's uid (`AccountName`), only with a uid.
    private static func account<Field: RawRepresentable>(_ record: JSONObjectReader, _ field: Field, uid: UInt32?) throws -> String? where Field.RawValue == String {
        // Absent, never null: the schema's string (an older file has no field; none writes null).
        if record.object[field.rawValue] == .null {
            throw JSONFieldError(path: record.fieldPath(field), kind: .invalidValue("must be a string, or absent"))
        }
        guard let account = try record.optionalString(field) else { return nil }
        guard uid != nil, AccountName.isRecorded(account) else {
            throw JSONFieldError(path: record.fieldPath(field), kind: .invalidValue("must be an account name of at most \(AccountName.maximumPlainLength) printable ASCII characters, or sha256: and 64 hex digits, and only with a uid"))
        }
        return account
    }

    static func isPlainFileName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 255 && !name.hasPrefix(".") && !name.contains("/") && !name.contains("\0")
    }

    static func parseHandle(_ text: String) -> UInt32? {
        guard text.hasPrefix("0x"), text.count == 10 else { return nil }
        return UInt32(text.dropFirst(2), radix: 16)
    }
}
