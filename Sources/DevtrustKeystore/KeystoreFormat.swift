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
        var document: JSONObject = ["version": .integer(currentVersion)]
        if let key = state.key {
            var record: JSONObject = [
                "backend": .string(key.backend.rawValue),
                "file": .string(key.file),
                "fingerprint": .string(key.fingerprint),
                "createdAt": .string(key.createdAt),
            ]
            if let parent = key.tpmParent { record["tpmParent"] = .string(Base64.encode(parent)) }
            document["key"] = .object(record)
        } else {
            document["key"] = .null
        }
        document["registrations"] = .array(state.registrations.map { record in
            .object([
                "registrationId": .string(record.registrationId),
                "server": .string(record.server),
                "flowType": .string(record.flowType),
                "keyFingerprint": .string(record.keyFingerprint),
                "registeredAt": .string(record.registeredAt),
            ])
        })
        document["tpmPersistentHandles"] = .array(state.tpmPersistentHandles.map { .string(TPMHandle.format($0)) })
        document["signIns"] = .array(state.signIns.map { record in
            var object: JSONObject = ["id": .string(record.id)]
            if let server = record.server { object["server"] = .string(server) }
            if let discovery = record.discovery { object["discovery"] = .string(discovery) }
            object["clientId"] = .string(record.clientId)
            object["scope"] = .string(record.scope)
            object["method"] = .string(record.method)
            object["file"] = .string(record.file)
            object["signedInAt"] = .string(record.signedInAt)
            return .object(object)
        })
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
        try reader.rejectUnknownFields(known: ["version", "key", "registrations", "tpmPersistentHandles"] + (version >= 2 ? ["signIns"] : []))
        var state = KeystoreState()
        if let key = try reader.optionalObject("key") {
            try key.rejectUnknownFields(known: ["backend", "file", "fingerprint", "createdAt", "tpmParent"])
            let backendName = try key.string("backend")
            guard let backend = KeyBackend(rawValue: backendName) else {
                throw JSONFieldError(path: key.fieldPath("backend"), kind: .invalidValue("unknown backend \"\(backendName)\" (known: software, tpm)"))
            }
            let file = try key.string("file")
            guard isPlainFileName(file) else {
                throw JSONFieldError(path: key.fieldPath("file"), kind: .invalidValue("must be a file name inside the keystore, not \"\(file)\""))
            }
            var tpmParent: [UInt8]?
            if let text = try key.optionalString("tpmParent") {
                guard backend == .tpm, let bytes = try? Base64.decode(text, padding: .required), !bytes.isEmpty else {
                    throw JSONFieldError(path: key.fieldPath("tpmParent"), kind: .invalidValue("must be standard base64, and only on a tpm key"))
                }
                tpmParent = bytes
            }
            state.key = KeyRecord(backend: backend, file: file, fingerprint: try key.string("fingerprint"),
                                  createdAt: try key.string("createdAt"), tpmParent: tpmParent)
        }
        for (index, element) in try reader.array("registrations").enumerated() {
            let record = try JSONObjectReader(element, path: "registrations[\(index)]")
            try record.rejectUnknownFields(known: ["registrationId", "server", "flowType", "keyFingerprint", "registeredAt"])
            state.registrations.append(RegistrationRecord(
                registrationId: try record.string("registrationId"),
                server: try record.string("server"),
                flowType: try record.string("flowType"),
                keyFingerprint: try record.string("keyFingerprint"),
                registeredAt: try record.string("registeredAt")))
        }
        if state.key == nil && !state.registrations.isEmpty {
            throw JSONFieldError(path: "registrations", kind: .invalidValue("registrations are recorded but there is no key"))
        }
        if version >= 2 {
            for (index, element) in try reader.array("signIns").enumerated() {
                let record = try JSONObjectReader(element, path: "signIns[\(index)]")
                try record.rejectUnknownFields(known: ["id", "server", "discovery", "clientId", "scope", "method", "file", "signedInAt"])
                let file = try record.string("file")
                guard isPlainFileName(file), file.hasPrefix("signin-") else {
                    throw JSONFieldError(path: record.fieldPath("file"), kind: .invalidValue("must be a signin-*.json file name inside the keystore"))
                }
                let server = try record.optionalString("server")
                let discovery = try record.optionalString("discovery")
                guard server != nil || discovery != nil else {
                    throw JSONFieldError(path: record.fieldPath("server"), kind: .invalidValue("a sign-in needs a server or a discovery URL"))
                }
                state.signIns.append(SignInRecord(
                    id: try record.string("id"), server: server, discovery: discovery, clientId: try record.string("clientId"),
                    scope: try record.string("scope"), method: try record.string("method"), file: file,
                    signedInAt: try record.string("signedInAt")))
            }
        }
        if reader.object["tpmPersistentHandles"] != nil {
            for (index, element) in try reader.array("tpmPersistentHandles").enumerated() {
                guard let text = element.stringValue, let handle = parseHandle(text) else {
                    throw JSONFieldError(path: "tpmPersistentHandles[\(index)]", kind: .invalidValue("must be a handle such as \"0x81000001\""))
                }
                state.tpmPersistentHandles.append(handle)
            }
        }
        return state
    }

    static func isPlainFileName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 255 && !name.hasPrefix(".") && !name.contains("/") && !name.contains("\0")
    }

    static func parseHandle(_ text: String) -> UInt32? {
        guard text.hasPrefix("0x"), text.count == 10 else { return nil }
        return UInt32(text.dropFirst(2), radix: 16)
    }
}
