import DevtrustDevice
import DevtrustEncoding
import DevtrustKeystore
import DevtrustSystem

enum InitCommand {
    static func run(_ context: CommandContext) throws {
        let choiceName = context.arguments.value("backend") ?? "auto"
        guard let choice = BackendChoice(rawValue: choiceName) else {
            throw UsageError("--backend must be auto, tpm or software, not \"\(choiceName)\"", command: "init")
        }
        var importing = try context.arguments.value("import").map { path throws -> (contents: [UInt8], source: String) in
            do {
                return (try FileReader.read(path, limit: 65_536), path)
            } catch {
                throw UsageError("--import: \(error)", command: "init")
            }
        }
        // A software key's file: wiped as soon as the keystore has the key (ImportedKeyMemoryTests).
        defer { importing?.contents.zeroize() }
        let imported = importing != nil
        let store = try context.deviceStore()
        let outcome = try store.initialize(backend: choice, force: context.arguments.has("force"), importing: importing)
        importing?.contents.zeroize()
        let keystore = store.keystore
        switch outcome {
        case let .kept(record):
            context.info("a \(record.backend.rawValue) device key already exists in \(keystore.path) (fingerprint \(record.fingerprint)); keeping it. `devtrust init --force` replaces it.")
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: false, notes: [])))) }
        case let .created(record, dropped, notes):
            for note in notes { context.info(note) }
            let verb = imported ? "imported" : "created"
            let place = record.backend == .tpm ? "in the TPM (key blob: \(keystore.path)/\(record.file))" : "in \(keystore.path)/\(record.file)"
            context.info("\(verb) a \(record.backend.rawValue) P-256 device key \(place) (fingerprint \(record.fingerprint))")
            for registration in dropped {
                context.warn("forgot registration \(registration.registrationId) with \(registration.server), made with the old key; register again")
            }
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: true, notes: notes)))) }
        }
    }

    private static func summary(_ record: KeyRecord, keystore: Keystore, created: Bool, notes: [String]) -> JSONObject {
        [
            "created": .bool(created),
            "backend": .string(record.backend.rawValue),
            "fingerprint": .string(record.fingerprint),
            "keystore": .string(keystore.path),
            "notes": .array(notes.map { .string($0) }),
        ]
    }
}
