import DevtrustAgent
import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignInService

/// `reset`: revokes the stored sign-ins (best effort), then deletes the key,
/// the registrations and the sign-ins (the TPM's shared storage root key
/// stays). A damaged keystore is moved aside instead.
enum ResetCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let yes = FlagOption<Self>("yes", "do not ask for confirmation")
        static let uid = ValueOption<Self>("uid", "UID", .text,
                                           "forget only the registrations of this uid, whichever account made them (root: a departed user's at the agent)")
        static let spec = CommandSpec(name: "reset", summary: "revoke the sign-ins, delete the device key and the registrations", options: [yes, uid])

        var yes: Bool
        var uid: String?

        init(_ values: OptionValues<Self>) {
            yes = values[Self.yes]
            uid = values[Self.uid]
        }
    }

    /// How long reset waits for a server to revoke a sign-in: it never holds the reset up for long.
    static let revocationConnectTimeoutSeconds = 5
    static let revocationRequestTimeoutSeconds = 10

    static func run(_ context: CommandContext, _ options: Options) throws {
        if let text = options.uid {
            return try forgetUID(context, options, uid: try uid(text))
        }
        if case let .agent(agent) = try context.deviceAccess(command: Options.spec.name) {
            // The machine keystore is the machine's: root resets it by naming it (`--keystore`), nobody through the agent.
            return try resetThroughAgent(context, options, agent)
        }
        let store = try context.deviceStore()
        let keystore = store.keystore
        let state: KeystoreState
        do {
            state = try store.state()
        } catch let error as KeystoreError where Keystore.isDamage(error) {
            try moveAside(context, options, keystore: keystore, damage: error)
            return
        }
        guard state.key != nil || !state.registrations.isEmpty || !state.tpmPersistentHandles.isEmpty || !state.signIns.isEmpty else {
            context.info("nothing to reset: there is no device key in \(keystore.path)")
            return
        }
        if !options.yes {
            let question = "Delete " + deletedItems(state) + " in \(keystore.path)? The device will have to be registered again. [y/N] "
            guard try confirm(context, question, refusal: "reset deletes the device key; confirm with --yes when not at a terminal") else { return }
        }
        revokeSignIns(context, store: store, state.signIns)
        let outcome = try store.reset()
        let registrations = outcome.previous.registrations.count
        let signIns = outcome.previous.signIns.count
        var deleted = outcome.previous.key == nil ? [] : ["the device key"]
        if registrations > 0 { deleted.append("\(registrations) registration(s)") }
        if signIns > 0 { deleted.append("\(signIns) sign-in(s)") }
        context.success("deleted " + (deleted.isEmpty ? "the keystore's records" : listed(deleted)) + " from \(keystore.path)")
        // The persistent parent the key was made under, if it had one.
        let parent = outcome.previous.key?.tpmParent.flatMap(TPMParentRecord.init(serialized:))?.handle
            ?? outcome.previous.tpmPersistentHandles.first
        if let parent, TPMHandle.isPersistent(parent) {
            let handle = TPMHandle.format(parent)
            context.info("left the TPM's storage root key at \(handle) in place: keys of other keystores and programs (tpm2-openssl, systemd) may use it, and it holds no secret; if nothing does, `tpm2_evictcontrol -C o -c \(handle)` removes it")
        }
    }

    /// `reset` with the system agent: your sign-ins (in your own keystore) revoked and deleted, then
    /// your registrations of the machine key forgotten by the agent. The machine key and other users'
    /// registrations stay; a key of your own in your keystore too (`--keystore DIR reset` deletes it).
    private static func resetThroughAgent(_ context: CommandContext, _ options: Options, _ agent: AgentClient) throws {
        let store = try context.deviceStore()
        let keystore = store.keystore
        var own = KeystoreState()
        do {
            own = try store.state()
        } catch let error as KeystoreError where Keystore.isDamage(error) {
            context.warn("your own keystore \(keystore.path) is damaged (\(error)), so its sign-ins cannot be revoked; "
                         + "`devtrust --keystore \(keystore.path) reset --yes` moves it aside")
        }
        let (agentState, agentKeystore) = try agent.ownState()
        let registrations = agentState.registrations
        guard !registrations.isEmpty || !own.signIns.isEmpty else {
            context.info("nothing to reset: you have no registrations at the devtrust agent (\(agent.socket)) and no sign-ins in \(keystore.path)")
            return
        }
        if !options.yes {
            var items = [String]()
            if !own.signIns.isEmpty { items.append("revoke and delete " + signInsText(own.signIns) + " in \(keystore.path)") }
            if !registrations.isEmpty { items.append("have the devtrust agent forget " + registrationsText(registrations)) }
            let text = listed(items)
            let question = text.prefix(1).uppercased() + String(text.dropFirst()) + "? The machine's key stays"
                + (registrations.isEmpty ? "" : "; you will have to register again") + ". [y/N] "
            guard try confirm(context, question, refusal: "reset forgets your registrations; confirm with --yes when not at a terminal") else { return }
        }
        revokeSignIns(context, store: store, own.signIns)
        for record in own.signIns { try store.removeSignIn(record) }
        if !own.signIns.isEmpty { context.success("deleted \(own.signIns.count) sign-in(s) from \(keystore.path)") }
        let forgotten = try agent.forgetRegistrations()
        let servers = forgotten.compactMap { $0["server"]?.stringValue }
        context.success("the devtrust agent at \(agent.socket) forgot your \(forgotten.count) registration(s)"
                        + (servers.isEmpty ? "" : " (with " + servers.joined(separator: ", ") + ")")
                        + "; the machine's key and other users' registrations stay")
        if let note = OwnKeystoreNote(state: own, path: keystore.path, agentKeystore: agentKeystore, agentKey: agentState.key?.fingerprint) {
            let key = note.key
            context.info("your own keystore \(keystore.path) still holds a key (\(key.backend.rawValue), fingerprint \(key.fingerprint)) and "
                         + "\(own.registrations.count) registration(s), which devtrust does not use while the agent answers: "
                         + "`devtrust --keystore \(keystore.path) reset --yes` deletes them")
        }
    }

    static func uid(_ text: String) throws -> UInt32 {
        guard !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber), let uid = UInt32(text) else {
            throw UsageError("--uid takes a uid, a number from 0 to 4294967295, not \"\(String(text.prefix(64)))\" "
                             + "(a departed user has no name left: `sudo devtrust --keystore /var/lib/devtrust status --json` shows each registration's uid and account)",
                             command: "reset")
        }
        return uid
    }

    /// `reset --uid UID`: the registrations of one uid forgotten, whichever account made them (a user
    /// who left, before their uid is given to someone else), and nothing else: no key, no sign-in.
    /// Through the agent only root may; in a keystore named (`--keystore`), its owner.
    private static func forgetUID(_ context: CommandContext, _ options: Options, uid: UInt32) throws {
        // What was forgotten, as the agent's answer and keystore.json both name it.
        typealias Forgotten = (registrationId: String, server: String, account: String?)
        let place: String
        let forget: () throws -> [Forgotten]
        switch try context.deviceAccess(command: Options.spec.name) {
        case let .agent(agent):
            place = "the devtrust agent at \(agent.socket)"
            forget = {
                try agent.forgetRegistrations(uid: uid).map { object in
                    (object["registrationId"]?.stringValue ?? "?", object["server"]?.stringValue ?? "?", object["account"]?.stringValue)
                }
            }
        case .keystore:
            let store = try context.deviceStore()
            place = store.keystore.path
            forget = { try store.forgetRegistrations(of: RegistrationHolder(uid: uid)).map { ($0.registrationId, $0.server, $0.account) } }
        }
        if !options.yes {
            let question = "Forget every registration of uid \(uid) in \(place), whichever account made it? Its tokens cannot be had again. [y/N] "
            guard try confirm(context, question, refusal: "reset --uid forgets a user's registrations; confirm with --yes when not at a terminal") else { return }
        }
        let forgotten = try forget()
        guard !forgotten.isEmpty else {
            context.info("nothing to forget: uid \(uid) has no registrations in \(place)")
            return
        }
        let accounts = Array(Set(forgotten.compactMap(\.account))).sorted()
        context.success("\(place) forgot \(forgotten.count) registration(s) of uid \(uid)"
                        + (accounts.isEmpty ? "" : " (account " + accounts.joined(separator: ", ") + ")")
                        + ": " + forgotten.map { "\($0.registrationId) with \($0.server)" }.joined(separator: ", ")
                        + "; their ids stay theirs (the agent records them for no other account while it keeps them: 512 forgotten ids at most); delete the devices at their servers too")
    }

    private static func signInsText(_ signIns: [SignInRecord]) -> String {
        "\(signIns.count) sign-in(s) (at " + signIns.map { $0.server ?? $0.discovery ?? "?" }.joined(separator: ", ") + ")"
    }

    private static func registrationsText(_ registrations: [RegistrationRecord]) -> String {
        "your \(registrations.count) registration(s) (with " + registrations.map(\.server).joined(separator: ", ") + ")"
    }

    /// What the prompt says will go: the key, the registrations with their servers, the sign-ins.
    static func deletedItems(_ state: KeystoreState) -> String {
        var items = [String]()
        if let key = state.key { items.append("the \(key.backend.rawValue) device key") }
        let servers = state.registrations.map(\.server)
        items.append("\(servers.count) registration(s)" + (servers.isEmpty ? "" : " (with " + servers.joined(separator: ", ") + ")"))
        if !state.signIns.isEmpty {
            let places = state.signIns.map { $0.server ?? $0.discovery ?? "?" }
            items.append("\(places.count) sign-in(s) (at " + places.joined(separator: ", ") + "; revoked there first)")
        }
        return listed(items)
    }

    private static func listed(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + items.last!
    }

    /// Asks at a terminal; refuses (exit 2) elsewhere. Declining is an answer, not a failure (as `rm -i` takes it).
    private static func confirm(_ context: CommandContext, _ question: String, refusal: String) throws -> Bool {
        guard context.terminal.inputIsTerminal else { throw UsageError(refusal, command: "reset") }
        guard let answer = context.terminal.readLine(prompt: question), ["y", "yes"].contains(answer.lowercased()) else {
            context.info("reset cancelled: nothing deleted")
            return false
        }
        return true
    }

    /// Best effort, with short timeouts: a sign-in that cannot be revoked is
    /// deleted all the same, with a line for each token left valid at its server.
    private static func revokeSignIns(_ context: CommandContext, store: DeviceStore, _ records: [SignInRecord]) {
        guard !records.isEmpty else { return }
        var http = Configuration.HTTPSettings()
        do {
            http = try context.configuration().http
        } catch {
            context.warn("the configuration cannot be read (\(error)); revoking with the default HTTP settings")
        }
        http.connectTimeoutSeconds = min(http.connectTimeoutSeconds, revocationConnectTimeoutSeconds)
        http.requestTimeoutSeconds = min(http.requestTimeoutSeconds, revocationRequestTimeoutSeconds)
        let oauth = HTTPClientSettings(caFile: context.global.caFile, http: http, environment: context.environment.variables).oauthClient(context)
        for record in records {
            let revocation = SignInRevocation(record, tokens: try? store.tokens(of: record), oauth: oauth)
            let place = "the sign-in at \(revocation.place) (client \(record.clientId))"
            let revoked = revocation.revoked
            if !revoked.isEmpty { context.info("revoked the \(revoked.joined(separator: " and ")) of \(place)") }
            for failure in revocation.failures { context.warn("\(place): \(failure)") }
        }
    }

    /// keystore.json cannot be read: the keystore goes aside whole (it holds the
    /// old key file and any sign-ins' tokens), and a new one can be made in its place.
    private static func moveAside(_ context: CommandContext, _ options: Options, keystore: Keystore, damage: KeystoreError) throws {
        if !options.yes {
            let question = "\(damage)\nMove the damaged keystore \(keystore.path) aside (sign-ins recorded in it cannot be revoked)? [y/N] "
            guard try confirm(context, question, refusal: "the keystore is damaged (\(damage)); `reset --yes` moves it aside") else { return }
        }
        let stamp = Timestamp.format(secondsSinceEpoch: context.environment.clock.secondsSinceEpoch()).filter { $0 != "-" && $0 != ":" }
        let target = try keystore.moveAside(stamp: stamp)
        context.success("moved the damaged keystore aside to \(target) (mode 0700): it keeps the old key file and any sign-ins' tokens, which could not be revoked; delete it once nothing in it is needed. `devtrust init` makes a new key in \(keystore.path) (then register again)")
        if context.json {
            context.output(JSONWriter.string(.object(["movedAside": .string(target), "keystore": .string(keystore.path)])))
        }
    }
}
