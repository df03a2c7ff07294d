import DevtrustDevice
import DevtrustEncoding
import DevtrustKeystore

enum InitCommand {
    static func run(_ context: CommandContext) throws {
        let choiceName = context.arguments.value("backend") ?? "auto"
        guard let choice = BackendChoice(rawValue: choiceName) else {
            throw UsageError("--backend must be auto, tpm or software, not \"\(choiceName)\"", command: "init")
        }
        let keystore = try context.keystore()
        let store = DeviceStore(keystore: keystore, clock: context.environment.clock)
        let outcome = try store.initialize(backend: choice, force: context.arguments.has("force"))
        switch outcome {
        case let .kept(record):
            context.info("a \(record.backend.rawValue) device key already exists in \(keystore.path) (fingerprint \(record.fingerprint)); keeping it. `devtrust init --force` replaces it.")
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: false)))) }
        case let .created(record, dropped):
            context.info("created a \(record.backend.rawValue) P-256 device key in \(keystore.path)/\(record.file) (fingerprint \(record.fingerprint))")
            for registration in dropped {
                context.warn("forgot registration \(registration.registrationId) with \(registration.server), made with the old key; register again")
            }
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: true)))) }
        }
    }

    private static func summary(_ record: KeyRecord, keystore: Keystore, created: Bool) -> JSONObject {
        [
            "created": .bool(created),
            "backend": .string(record.backend.rawValue),
            "fingerprint": .string(record.fingerprint),
            "keystore": .string(keystore.path),
        ]
    }
}
