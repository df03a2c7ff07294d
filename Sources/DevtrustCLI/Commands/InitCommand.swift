import DevtrustAgent
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeystore
import DevtrustSystem
import Glibc

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
        outcome.report(context, keystore: store.keystore, imported: imported, agent: AgentStandsIn.asked(context, keystore: store.keystore, key: outcome.record))
    }
}

/// `init` on a machine whose system agent answers for the device key: the keystore it made (or
/// kept) is not the one the commands that need the key use, unless it is named. Said on stderr
/// (a warning: the key is made all the same, and the exit code is init's), with the way to use
/// it; nothing when a keystore is named (`--keystore`, DEVTRUST_KEYSTORE), when no agent answers
/// (those commands then say so themselves), or when this keystore is the agent's own (root's
/// `init` of /var/lib/devtrust, the machine key).
struct AgentStandsIn: Equatable {
    let socket: String
    /// The agent's keystore and key, as it says them (nil: it refused this user, or has no key yet).
    let agentKeystore: String?
    let agentKey: KeyRecord?
    /// Why the agent refused this user (its policy), when it did.
    let refusal: String?
    let keystore: String

    /// How long `init` waits for the agent's answer (as `doctor` does).
    static let seconds = 5

    /// Whether the commands that need the device key would go through the agent rather than
    /// `keystore` (DeviceKeyAccess's rule), and the agent answers: nil when not.
    /// `key`: the key `init` made or kept in `keystore`.
    static func asked(_ context: CommandContext, keystore: Keystore, key: KeyRecord) -> AgentStandsIn? {
        // init never refused `--keystore` with `--agent` (the keystore is named): it still does not.
        guard case let .agent(named)? = try? context.deviceAccess(command: InitCommand.Options.spec.name) else { return nil }
        let agent = AgentClient(socket: named.socket, timeoutMilliseconds: seconds * 1000)
        do {
            let (state, agentKeystore) = try agent.ownState()
            if state.key?.fingerprint == key.fingerprint || sameDirectory(agentKeystore, keystore.path) { return nil }
            return AgentStandsIn(socket: agent.socket, agentKeystore: agentKeystore, agentKey: state.key, refusal: nil, keystore: keystore.path)
        } catch let refusal as AgentRefusal {
            return AgentStandsIn(socket: agent.socket, agentKeystore: nil, agentKey: nil, refusal: refusal.classification.summary, keystore: keystore.path)
        } catch {
            return nil
        }
    }

    /// Whether two paths name one directory (a link, a trailing slash, `..`): compared as written when either does not resolve.
    static func sameDirectory(_ first: String, _ second: String) -> Bool {
        guard first != second else { return true }
        guard let one = CacheDirectory.canonical(first) else { return false }
        return one == CacheDirectory.canonical(second)
    }

    var text: String {
        let key = agentKey.map { "\($0.backend.rawValue) key \($0.fingerprint), in \(agentKeystore ?? "?")" }
            ?? agentKeystore.map { "its keystore \($0) holds no key yet" }
        let agent = "the devtrust agent at \(socket) answers for this machine's device key"
            + (key.map { " (\($0))" } ?? "") + (refusal.map { ", and refused you: \($0)" } ?? "")
        return agent + "; the commands that use the device key (token, register, status, ...) go through it, not through \(keystore): "
            + "to use this keystore, name it: `devtrust --keystore \(keystore) COMMAND` (or DEVTRUST_KEYSTORE=\(keystore)); "
            + "`devtrust --keystore \(keystore) reset --yes` deletes it"
    }

    /// `init --json`'s `agent`.
    var json: JSONValue {
        .object(["socket": .string(socket), "keystore": agentKeystore.map(JSONValue.string) ?? .null,
                 "fingerprint": agentKey.map { .string($0.fingerprint) } ?? .null, "note": .string(text)])
    }
}

extension InitOutcome {
    /// The key made or kept.
    var record: KeyRecord {
        switch self {
        case let .created(record, _, _), let .kept(record): record
        }
    }

    /// What `init` says of the key it made or kept: on stderr, and the `--json` summary on stdout.
    /// `register` says the same of the key it makes first (without the summary: its own is the artifact).
    /// `agent`: the system agent that answers for the device key instead of this keystore (`init`'s warning).
    func report(_ context: CommandContext, keystore: Keystore, imported: Bool, agent: AgentStandsIn? = nil) {
        switch self {
        case let .kept(record):
            context.info("a \(record.backend.rawValue) device key already exists in \(keystore.path) (fingerprint \(record.fingerprint)); keeping it. `devtrust init --force` replaces it.")
            if let agent { context.warn(agent.text) }
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: false, notes: [], agent: agent)))) }
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
            if let agent { context.warn(agent.text) }
            if context.json { context.output(JSONWriter.string(.object(summary(record, keystore: keystore, created: true, notes: notes, agent: agent)))) }
        }
    }

    private func summary(_ record: KeyRecord, keystore: Keystore, created: Bool, notes: [String], agent: AgentStandsIn?) -> JSONObject {
        var summary: JSONObject = [
            "created": .bool(created),
            "backend": .string(record.backend.rawValue),
            "fingerprint": .string(record.fingerprint),
            "keystore": .string(keystore.path),
            "notes": .array(notes.map { .string($0) }),
        ]
        // Only a TPM key's recorded TCTI.
        if let tcti = record.tcti { summary["tcti"] = .string(tcti) }
        // Only when the system agent answers for the device key instead.
        if let agent { summary["agent"] = agent.json }
        return summary
    }
}
