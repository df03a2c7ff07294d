import DevtrustDevice
import DevtrustEncoding
import DevtrustKeystore

/// `status`: where the key lives, whether it loads, and the registrations.
enum StatusCommand {
    static func run(_ context: CommandContext) throws {
        let keystore = try context.keystore()
        let store = DeviceStore(keystore: keystore)
        let state = try store.state()
        var keyLoads: Bool?
        var loadProblem: String?
        if state.key != nil {
            do {
                _ = try store.loadKey()
                keyLoads = true
            } catch {
                keyLoads = false
                loadProblem = ErrorReport.from(error).message
            }
        }
        if context.json {
            context.output(JSONWriter.string(.object(document(state, keystore: keystore, keyLoads: keyLoads, problem: loadProblem))))
            return
        }
        var lines = ["keystore: \(keystore.path)"]
        if let key = state.key {
            lines.append("key: \(key.backend.rawValue) P-256, fingerprint \(key.fingerprint), created \(key.createdAt)")
            lines.append("key loads: " + (keyLoads == true ? "yes" : "no: \(loadProblem ?? "unknown")"))
        } else {
            lines.append("key: none (run `devtrust init`)")
        }
        if state.registrations.isEmpty {
            lines.append("registrations: none" + (state.key == nil ? "" : " (run `devtrust register --server URL`)"))
        } else {
            lines.append("registrations:")
            for record in state.registrations {
                lines.append("  \(record.server): device id \(record.registrationId), \(record.flowType), registered \(record.registeredAt)")
            }
        }
        lines.append("sign-ins: none")
        context.output(lines.joined(separator: "\n"))
    }

    private static func document(_ state: KeystoreState, keystore: Keystore, keyLoads: Bool?, problem: String?) -> JSONObject {
        var document: JSONObject = ["keystore": .string(keystore.path)]
        if let key = state.key {
            var keyObject: JSONObject = [
                "backend": .string(key.backend.rawValue),
                "fingerprint": .string(key.fingerprint),
                "algorithm": .string("ES256"),
                "createdAt": .string(key.createdAt),
                "loads": .bool(keyLoads == true),
            ]
            if let problem { keyObject["problem"] = .string(problem) }
            document["key"] = .object(keyObject)
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
        document["signIns"] = .array([])
        return document
    }
}
