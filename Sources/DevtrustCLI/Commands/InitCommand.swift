import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeystore
import DevtrustSystem

enum InitCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let backend = ChoiceOption<Self, BackendChoice>("backend", "where the key lives (default auto: the TPM when one answers)")
        static let force = FlagOption<Self>("force", "replace an existing key (forgets the registrations made with it)")
        static let importFile = ValueOption<Self>("import", "FILE", .file,
                                                  "use this key file: a TSS2 PRIVATE KEY (tpm2-openssl) or a PKCS#8 P-256 PRIVATE KEY")
        static let spec = CommandSpec(name: "init", summary: "create the device key", options: [backend, force, importFile])

        var backend: String?
        var force = false
        var importFile: String?

        init(_ values: OptionValues<Self>) {
            backend = values[Self.backend]
            force = values[Self.force]
            importFile = values[Self.importFile]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let choice = try Options.backend.choice(options.backend) ?? .auto
        var importing = try options.importFile.map { path throws -> (contents: [UInt8], source: String) in
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
        let outcome = try store.initialize(backend: choice, force: options.force, importing: importing)
        importing?.contents.zeroize()
        outcome.report(context, keystore: store.keystore, imported: imported)
    }
}

extension InitOutcome {
    /// What `init` says of the key it made or kept: on stderr, and the `--json` summary on stdout.
    /// `register` says the same of the key it makes first (without the summary: its own is the artifact).
    func report(_ context: CommandContext, keystore: Keystore, imported: Bool) {
        switch self {
        case let .kept(record):
            context.info("a \(record.backend.rawValue) device key already exists in \(keystore.path) (fingerprint \(record.fingerprint)); keeping it. `devtrust init --force` replaces it.")
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: false, notes: [])))) }
        case let .created(record, dropped, notes):
            for note in notes { context.info(note) }
            let verb = imported ? "imported" : "created"
            let tpm = record.tcti.map { " at \($0)" } ?? ""
            let place = record.backend == .tpm ? "in the TPM\(tpm) (key blob: \(keystore.path)/\(record.file))" : "in \(keystore.path)/\(record.file)"
            context.success("\(verb) a \(record.backend.rawValue) P-256 device key \(place) (fingerprint \(record.fingerprint))")
            if let tcti = record.tcti {
                context.info("recorded the TCTI \(tcti) with the key: later commands use it unless --tcti or a TCTI variable (DEVTRUST_TCTI, TPM2TOOLS_TCTI, TSS2_TCTI) says otherwise")
            }
            for registration in dropped {
                context.warn("forgot registration \(registration.registrationId) with \(registration.server), made with the old key; register again")
            }
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: true, notes: notes)))) }
        }
    }

    private func summary(_ record: KeyRecord, keystore: Keystore, created: Bool, notes: [String]) -> JSONObject {
        var summary: JSONObject = [
            "created": .bool(created),
            "backend": .string(record.backend.rawValue),
            "fingerprint": .string(record.fingerprint),
            "keystore": .string(keystore.path),
            "notes": .array(notes.map { .string($0) }),
        ]
        // Only a TPM key's recorded TCTI.
        if let tcti = record.tcti { summary["tcti"] = .string(tcti) }
        return summary
    }
}
