import DevtrustAgent
import DevtrustDevice
import DevtrustDoctor
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignIn
import DevtrustTerminal
import DevtrustURL

/// `status`: where the key lives, whether it loads, the TPM, and the registrations.
enum StatusCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "status", summary: "show the key, its backend and the registrations", options: [])

        init(_ values: OptionValues<Self>) {}
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        if case let .agent(agent) = try context.deviceAccess(command: Options.spec.name) {
            return try runThroughAgent(context, agent)
        }
        let store = try context.deviceStore()
        let keystore = store.keystore
        // Every registration, the system agent's users' too (`uid`): the keystore's owner reads them all anyway.
        let state = try store.wholeState()
        let probes = BoundedProbes(isolated: context.environment.isolatesProbes)
        // The TPM is described when the key is in it, or when one answers: the key's, when it has a recorded TCTI.
        let tpmSelection = store.tpm(for: state.key)
        var health: KeyHealth?
        if let key = state.key {
            health = key.backend == .tpm ? KeyHealth.boundedKeyHealth(store, selection: tpmSelection, probes: probes) : KeyHealth.keyHealth(store)
        }
        let tpm = KeyHealth.describeTPM(tpmSelection, probes: probes, skip: health?.timedOut == true)
        let recordedTCTI = tcti(of: state.key, selection: context.tpmSelection)
        let clocks = context.clocks.records()
        let tokens = state.signIns.map { try? store.tokens(of: $0) }
        if context.json {
            var document = document(state, keystore: keystore, health: health, tpm: tpm, recordedTCTI: recordedTCTI)
            document["signIns"] = signInsJSON(state.signIns, tokens: tokens)
            annotateClocks(&document, clocks, context: context)
            context.output(JSONWriter.string(.object(document)))
            if let error = health?.error { throw error }
            return
        }
        var lines = ["keystore: \(keystore.path)"]
        if let key = state.key, let health {
            lines.append("key: \(key.backend.rawValue) P-256, fingerprint \(key.fingerprint), created \(key.createdAt)")
            if let parent = health.parentHandle { lines.append("key parent: \(TPMHandle.format(parent))" + (parent == TPMHandle.owner ? " (a transient primary recreated for every signature)" : "")) }
            if let recordedTCTI { lines.append("key TCTI: \(recordedTCTI.text)") }
            lines.append("key loads: " + (health.loads ? "yes" : "no: \(health.problem ?? "unknown")"))
            if let advice = KeyHealth.lockoutAdvice(health.lockoutExposure) { lines.append("key lockout: exposed: " + advice) }
            for notice in health.notices { lines.append("key notice: " + notice) }
        } else {
            lines.append("key: none (run `devtrust init`)")
        }
        switch tpm {
        case let .success(description):
            lines.append("TPM: \(description.manufacturer), firmware \(description.firmwareVersion), at \(description.tcti)")
        case let .failure(error):
            lines.append("TPM: \(error)")
        }
        if state.registrations.isEmpty {
            lines.append("registrations: none" + (state.key == nil ? "" : " (run `devtrust register --server URL`)"))
        } else {
            lines.append("registrations:")
            for record in state.registrations {
                let account = record.account.map { ", account \($0)" } ?? ""
                let owner = record.uid.flatMap { $0 == keystore.ownerID && record.account == nil ? nil : " (uid \($0)'s\(account), made through the agent)" } ?? ""
                lines.append("  \(record.server): device id \(record.registrationId), \(record.flowType), registered \(record.registeredAt)\(owner)")
            }
        }
        lines += signInLines(state.signIns, tokens: tokens)
        if !clocks.isEmpty {
            lines.append("server clocks (this machine's minus the server's, from its Date headers):")
            for origin in clocks.keys.sorted() {
                let record = clocks[origin]!
                var line = "  \(origin): \(record.skewSeconds > 0 ? "+" : "")\(record.skewSeconds) s, measured \(Timestamp.format(secondsSinceEpoch: record.measuredAt))"
                if ClockSkew.exceedsTolerance(record.skewSeconds) { line += ", beyond what the server accepts (set the clock right: `timedatectl set-ntp true`)" }
                if context.clocks.correction(for: origin) != nil { line += "; device tokens for it are written in its time" }
                lines.append(line)
            }
        }
        context.output(lines.joined(separator: "\n"))
        // Scripts rely on the exit code: a key that does not load is its error's (6 for the TPM, 7 for the keystore).
        if let error = health?.error { throw error }
    }

    /// The stored sign-ins, one line each (with who signed in and when the access token expires).
    private static func signInLines(_ signIns: [SignInRecord], tokens: [TokenSet?]) -> [String] {
        guard !signIns.isEmpty else { return ["sign-ins: none"] }
        var lines = ["sign-ins:"]
        for (record, tokens) in zip(signIns, tokens) {
            let who = tokens.map(SignInSettings.identityText) ?? ""
            var line = "  \(record.server ?? record.discovery ?? "?"): client \(record.clientId)\(who), \(record.method), scope \(record.scope), signed in \(record.signedInAt)"
            if let tokens, tokens.expiryAssumed || tokens.expiresAt == nil {
                line += "; access token lifetime unknown (the server gave no expires_in): " + (tokens.refreshToken == nil
                    ? "used until a resource refuses it" : "refreshed after \(TokenSet.assumedLifetime) s, or with `access-token --refresh`")
            } else if let expiresAt = tokens?.expiresAt {
                line += "; access token expires \(Timestamp.format(secondsSinceEpoch: expiresAt))"
            }
            lines.append(line)
        }
        return lines
    }

    /// The stored sign-ins for `--json`: as keystore.json has them, less its bookkeeping, with the tokens' expiry and who signed in.
    private static func signInsJSON(_ signIns: [SignInRecord], tokens: [TokenSet?]) -> JSONValue {
        let signInFields = KeystoreField.SignIn.allCases.filter { !$0.isBookkeeping }
        return .array(zip(signIns, tokens).map { record, tokens in
            var object = record.keystoreObject(fields: signInFields)
            object["accessTokenExpiresAt"] = tokens?.expiresAt.map { .string(Timestamp.format(secondsSinceEpoch: $0)) } ?? .null
            object["accessTokenLifetimeKnown"] = .bool(tokens.map { !$0.expiryAssumed && $0.expiresAt != nil } ?? false)
            // Who signed in, from the ID token devtrust checked before it kept it (null without one).
            let identity = tokens?.keptIdentity
            object["subject"] = identity.map { .string($0.subject) } ?? .null
            object["name"] = identity?.displayName.map { .string($0) } ?? .null
            return .object(object)
        })
    }

    /// `status` with the system agent: the machine's key and the caller's own registrations as the
    /// agent tells them; the sign-ins (the user's own, in their keystore); and, when the user has a
    /// key of their own too, that it is not used while the agent answers, and how to move.
    private static func runThroughAgent(_ context: CommandContext, _ agent: AgentClient) throws {
        let result = try agent.call(.status)
        let agentKeystore = result["keystore"]?.stringValue ?? "?"
        let key = result["key"]?.objectValue
        let registrations = result["registrations"]?.arrayValue ?? []
        // The user's own keystore: their sign-ins, and a key of theirs the agent now stands in for.
        let own = try? context.deviceStore()
        let ownState = (try? own?.state()) ?? nil
        let signIns = ownState?.signIns ?? []
        let tokens = signIns.map { record in own.flatMap { try? $0.tokens(of: record) } }
        let ownKey = ownState.flatMap { OwnKeystoreNote(state: $0, path: own!.keystore.path, agentKeystore: agentKeystore,
                                                        agentKey: key?["fingerprint"]?.stringValue) }
        let ownKeyNote = ownKey?.text
        if context.json {
            var document: JSONObject = ["agent": .object(["socket": .string(agent.socket), "policy": result["policy"] ?? .null]),
                                        "keystore": .string(agentKeystore)]
            if var key {
                key["algorithm"] = .string("ES256")
                document["key"] = .object(key)
            } else {
                document["key"] = .null
            }
            document["registrations"] = .array(registrations)
            document["signIns"] = signInsJSON(signIns, tokens: tokens)
            document["ownKeystore"] = ownKey.map { note in
                .object(["path": .string(note.path), "fingerprint": .string(note.key.fingerprint),
                         "registrations": .integer(Int64(note.registrations)), "note": .string(note.text)])
            } ?? .null
            context.output(JSONWriter.string(.object(document)))
            return
        }
        var lines = ["agent: \(agent.socket) (the machine's key, in \(agentKeystore))"]
        if let key, let backend = key["backend"]?.stringValue, let fingerprint = key["fingerprint"]?.stringValue {
            lines.append("key: \(backend) P-256, fingerprint \(fingerprint), created \(key["createdAt"]?.stringValue ?? "?")")
        } else {
            lines.append("key: none yet (the agent's administrator runs `devtrust init --keystore \(agentKeystore)`)")
        }
        if registrations.isEmpty {
            lines.append("registrations: none of yours" + (key == nil ? "" : " (run `devtrust register --server URL`)"))
        } else {
            lines.append("registrations (yours):")
            for case let .object(record) in registrations {
                lines.append("  \(record["server"]?.stringValue ?? "?"): device id \(record["registrationId"]?.stringValue ?? "?"), "
                             + "\(record["flowType"]?.stringValue ?? "?"), registered \(record["registeredAt"]?.stringValue ?? "?")")
            }
        }
        lines += signInLines(signIns, tokens: tokens)
        if let ownKeyNote { lines.append("note: " + ownKeyNote) }
        context.output(lines.joined(separator: "\n"))
    }

    /// The TCTI recorded with the key, and whether it is the one used now.
    private static func tcti(of key: KeyRecord?, selection: TPMSelection) -> (configuration: String, inUse: Bool, text: String)? {
        guard let configuration = key?.tcti else { return nil }
        let inUse = !selection.isExplicit
        let text = configuration + (inUse ? " (recorded with the key at init)"
            : " (recorded with the key at init; this run uses \(selection.candidates.joined(separator: ", ")), from --tcti or a TCTI variable)")
        return (configuration, inUse, text)
    }

    /// `clockSkewSeconds` on each registration and sign-in (null when never measured), and `clocks`, one per server.
    private static func annotateClocks(_ document: inout JSONObject, _ clocks: [String: ClockSkewRecord], context: CommandContext) {
        func skew(_ url: String?) -> JSONValue {
            guard let url, let record = clocks[Origin.text(of: url)] else { return .null }
            return .integer(record.skewSeconds)
        }
        for list in ["registrations", "signIns"] {
            document[list] = .array((document[list]?.arrayValue ?? []).map { element in
                guard var object = element.objectValue else { return element }
                object["clockSkewSeconds"] = skew((object["server"] ?? object["discovery"])?.stringValue)
                return .object(object)
            })
        }
        document["clocks"] = .array(clocks.keys.sorted().map { origin in
            let record = clocks[origin]!
            return .object(["server": .string(origin), "clockSkewSeconds": .integer(record.skewSeconds),
                            "measuredAt": .string(Timestamp.format(secondsSinceEpoch: record.measuredAt)),
                            "exceedsTolerance": .bool(ClockSkew.exceedsTolerance(record.skewSeconds)),
                            "correctsTokens": .bool(context.clocks.correction(for: origin) != nil)])
        })
    }

    private static func document(_ state: KeystoreState, keystore: Keystore, health: KeyHealth?, tpm: Result<TPMDescription, any Error>,
                                 recordedTCTI: (configuration: String, inUse: Bool, text: String)?) -> JSONObject {
        var document: JSONObject = ["keystore": .string(keystore.path)]
        if let key = state.key, let health {
            var keyObject: JSONObject = [
                "backend": .string(key.backend.rawValue),
                "fingerprint": .string(key.fingerprint),
                "algorithm": .string("ES256"),
                "createdAt": .string(key.createdAt),
                "loads": .bool(health.loads),
            ]
            if let parent = health.parentHandle { keyObject["tpmParent"] = .string(TPMHandle.format(parent)) }
            if let problem = health.problem { keyObject["problem"] = .string(problem) }
            if let recordedTCTI {
                keyObject["tcti"] = .string(recordedTCTI.configuration)
                keyObject["tctiInUse"] = .bool(recordedTCTI.inUse)
            }
            if let exposure = health.lockoutExposure {
                keyObject["lockoutExposed"] = .bool(exposure != .none)
                if let advice = KeyHealth.lockoutAdvice(exposure) { keyObject["lockoutAdvice"] = .string(advice) }
            }
            if !health.notices.isEmpty { keyObject["notices"] = .array(health.notices.map(JSONValue.string)) }
            document["key"] = .object(keyObject)
        } else {
            document["key"] = .null
        }
        switch tpm {
        case let .success(description):
            document["tpm"] = .object([
                "available": .bool(true), "tcti": .string(description.tcti),
                "manufacturer": .string(description.manufacturer), "firmwareVersion": .string(description.firmwareVersion),
            ])
        case let .failure(error):
            document["tpm"] = .object(["available": .bool(false), "problem": .string("\(error)")])
        }
        if !state.tpmPersistentHandles.isEmpty {
            document["tpmPersistentHandles"] = .array(state.tpmPersistentHandles.map { .string(TPMHandle.format($0)) })
        }
        // As keystore.json has them; a sign-in without the keystore's bookkeeping (its id and tokens file).
        document["registrations"] = .array(state.registrations.map { .object($0.keystoreObject) })
        document["signIns"] = .array([])
        return document
    }
}

/// A user's own keystore that holds a key while the system agent stands in for it: what `status`
/// and `doctor` say of it, and the way to keep using it or to move.
struct OwnKeystoreNote {
    let path: String
    let key: KeyRecord
    let registrations: Int

    /// Nil when the keystore holds no key, or the agent's key (root's keystore is the machine
    /// keystore, /var/lib/devtrust): then there is nothing the agent stands in for.
    /// `agentKeystore`, `agentKey`: the agent's keystore and key fingerprint, as it says them.
    init?(state: KeystoreState, path: String, agentKeystore: String?, agentKey: String?) {
        guard let key = state.key, key.fingerprint != agentKey, path != agentKeystore else { return nil }
        self.path = path
        self.key = key
        registrations = state.registrations.count
    }

    /// What there is, and that it is not used.
    var what: String {
        "your own keystore \(path) holds a key too (\(key.backend.rawValue), fingerprint \(key.fingerprint)) and "
            + "\(registrations) registration\(registrations == 1 ? "" : "s"), which devtrust does not use while the agent answers"
    }

    /// How to keep using it, or to move.
    var way: String {
        "`devtrust --keystore \(path) ...` (or DEVTRUST_KEYSTORE) still uses them; to move, "
            + "`devtrust register --server URL` again through the agent, then `devtrust --keystore \(path) reset --yes`"
    }

    var text: String { what + ": " + way }
}
