import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustSystem
import Glibc

/// What the agent does for a client, decided by who the kernel says the client is (`AgentPeer`):
/// the machine key's public key; device tokens for the caller's own registrations, with the posture
/// the agent collects itself and the claims the policy lets a client add; the caller's status; and
/// the Device Registration step of a caller's `register`, whose registration it records for that
/// caller at COMPLETE. Every decision is one audit line. Device tokens are minted by the one
/// service that mints them (`DeviceTokenService`), over the machine keystore, keeping the key loaded
/// (a TPM key in the TPM: a token costs one `Sign`). It runs on the agent's worker thread, one request
/// at a time (`AgentServer`); so do its user lookups (NSS: LDAP or sssd may be slow), never the loop.
public final class AgentService: AgentRequestHandler {
    /// Where the agent's key, configuration and posture come from.
    public struct Settings: Sendable {
        /// The machine keystore (the agent's user owns it: only it and root read the key).
        public var keystore: Keystore
        /// The administrator's configuration (platform, site claims, collector): the agent's, never a client's.
        public var configuration: Configuration
        public var policy: AgentPolicy
        /// Where the slow collectors' results are kept (the agent's cache directory).
        public var cache: CacheDirectory?
        public var clock: any Clock
        public var random: any RandomSource
        public var tpm: TPMSelection
        /// The prefix of every path the collectors read ("" on the machine).
        public var postureRoot = ""

        public init(keystore: Keystore, configuration: Configuration, policy: AgentPolicy, cache: CacheDirectory?, clock: any Clock,
                    random: any RandomSource, tpm: TPMSelection) {
            self.keystore = keystore
            self.configuration = configuration
            self.policy = policy
            self.cache = cache
            self.clock = clock
            self.random = random
            self.tpm = tpm
        }
    }

    /// A Device Registration step the agent answered for a user, until its flow completes.
    struct PendingRegistration {
        let holder: RegistrationHolder
        var uid: UInt32 { holder.uid }
        let server: String
        let registrationID: String
        let keyFingerprint: String
        let answeredAt: Int64
    }

    /// Steps answered and not completed, per user at most; and for how long (a flow's context expires sooner).
    static let pendingPerUser = 8
    static let pendingMilliseconds: Int64 = 3_600_000
    /// A user refused for their rate, or for who they are (no account, not in the policy's groups), is
    /// audited once in this long for each, with the count refused since: a loop writes no line a request.
    static let rateAuditMilliseconds: Int64 = 10_000

    public let settings: Settings
    private let keyCache = LoadedKeyCache()
    private let users = AgentUsers()
    private let rateLimiter: AgentRateLimiter
    var pending = [PendingRegistration]()
    /// When each uid's refusal of each kind (`AgentAuditRecord.outcome`) was last audited, and how many since.
    private var repeatedRefusals = [RepeatedRefusal: (audited: Int64, since: Int)]()

    private struct RepeatedRefusal: Hashable {
        let uid: UInt32
        let outcome: String
    }
    private let audit: (AgentAuditRecord) -> Void
    private let warn: (String) -> Void

    /// `audit`: where each decision goes; `warn`: what the collectors report (a failing admin collector).
    public init(settings: Settings, audit: @escaping (AgentAuditRecord) -> Void, warn: @escaping (String) -> Void) {
        self.settings = settings
        self.audit = audit
        self.warn = warn
        rateLimiter = AgentRateLimiter(burst: settings.policy.burst, perSecond: settings.policy.perSecond)
    }

    public func handle(_ peer: AgentPeer, _ request: AgentRequest) -> AgentReply {
        let now = AgentServer.now()
        let user = users.user(peer.uid, now: now)
        // Only root and uids with an account, whatever the policy says: a user has 65536 subordinate uids
        // (/etc/subuid, newuidmap), and each would bring its own rate, turns and connections.
        if peer.uid != 0, let why = user.withoutAccount {
            auditRepeated(peer, request, outcome: "refused: no account on this machine", now: now)
            return .failure(settings.policy.refusalWithoutAccount(uid: peer.uid, why: why).classification)
        }
        // Root reads the machine keystore anyway; everyone else as the policy says.
        guard peer.uid == 0 || settings.policy.allows(groups: user.groups) else {
            let refusal = settings.policy.refusal(uid: peer.uid)
            auditRepeated(peer, request, outcome: "refused: not allowed by the policy", now: now)
            return .failure(refusal.classification)
        }
        guard rateLimiter.take(peer.uid, now: now) else { return refuseRate(peer, request, now: now) }
        var outcome = AgentAuditRecord(peer: peer, operation: request.operation, server: request.server, outcome: "ok")
        do {
            let result: JSONObject
            switch request {
            case .publicKey:
                result = try publicKey(peer, user: user)
            case .status:
                result = try status(peer, user: user)
            case let .token(server, deviceID, claims):
                let (token, registration) = try token(peer, user: user, server: server, deviceID: deviceID, claims: claims)
                outcome = AgentAuditRecord(peer: peer, operation: request.operation, server: registration.server, jti: token.jti, outcome: "ok")
                result = ["token": .string(token.token)]
            case let .registrationStep(server, registrationID, challenge, requiredParams, claims):
                let deviceDataJTI: String?
                (result, deviceDataJTI) = try registrationStep(peer, user: user, server: server, registrationID: registrationID, challenge: challenge,
                                                               requiredParams: requiredParams, claims: claims, now: now)
                if let deviceDataJTI {
                    outcome = AgentAuditRecord(peer: peer, operation: request.operation, server: server, jti: deviceDataJTI, outcome: "ok")
                }
            case let .registrationComplete(server, registrationID, flowType):
                result = try registrationComplete(peer, user: user, server: server, registrationID: registrationID, flowType: flowType)
            case .signChallenge, .deviceData, .dpopProof, .signInToken, .forgetRegistrations:
                let answer = try answerClient(peer, user: user, request)
                outcome = AgentAuditRecord(peer: peer, operation: request.operation, server: answer.server ?? request.server, jti: answer.jti, outcome: answer.outcome)
                result = answer.result
            }
            audit(outcome)
            return .success(result)
        } catch {
            let classification = ErrorClassification(of: error)
            audit(AgentAuditRecord(peer: peer, operation: request.operation, server: request.server, outcome: "refused: \(classification.summary)"))
            return .failure(classification)
        }
    }

    /// The agent stops: the machine key leaves the TPM (no transient object is left behind).
    public func stop() {
        keyCache.release()
    }

    /// Audits a refusal that a loop meets again and again: the uid's first of its kind, then once
    /// in `rateAuditMilliseconds`, with the count refused since. Uids quiet that long are forgotten
    /// once many are kept (a user's subordinate uids are 65536).
    private func auditRepeated(_ peer: AgentPeer, _ request: AgentRequest, outcome: String, now: Int64) {
        let key = RepeatedRefusal(uid: peer.uid, outcome: outcome)
        var record = repeatedRefusals[key] ?? (audited: Int64.min, since: 0)
        record.since += 1
        if record.audited == Int64.min || now - record.audited >= Self.rateAuditMilliseconds {
            audit(AgentAuditRecord(peer: peer, operation: request.operation, server: request.server,
                                   outcome: outcome + (record.since > 1 ? " (\(record.since) refused since the last such line)" : "")))
            record = (now, 0)
        }
        repeatedRefusals[key] = record
        if repeatedRefusals.count > 4096 {
            repeatedRefusals = repeatedRefusals.filter { now - $0.value.audited < Self.rateAuditMilliseconds }
        }
    }

    private func refuseRate(_ peer: AgentPeer, _ request: AgentRequest, now: Int64) -> AgentReply {
        auditRepeated(peer, request, outcome: "refused: rate limit", now: now)
        let policy = settings.policy
        return .failure(ErrorClassification(.failure, summary: "the devtrust agent refused: uid \(peer.uid) asked more than \(policy.burst) times at once, "
                                            + "then more than \(policy.perSecond) times a second (the rate limit of \(policy.source ?? AgentPolicy.defaultPath))",
                                            hint: ErrorHint("wait a moment and ask again; a loop that asks for a token per request should reuse none, but slow down", joinedBy: "; ")))
    }

    /// The machine keystore as `peer` sees it: the key, and their own registrations only (those their
    /// uid recorded while it was their account's).
    func store(for peer: AgentPeer, _ user: AgentUsers.User) -> DeviceStore {
        DeviceStore(keystore: settings.keystore, clock: settings.clock, tpm: settings.tpm, random: settings.random, viewer: peer.uid,
                    viewerAccount: user.account, keyCache: keyCache)
    }

    /// Who the caller is to the registrations: their uid, and the account that has it now.
    static func holder(_ peer: AgentPeer, _ user: AgentUsers.User) -> RegistrationHolder {
        RegistrationHolder(uid: peer.uid, account: user.account)
    }

    func tokens(for peer: AgentPeer, user: AgentUsers.User, store: DeviceStore) -> DeviceTokenService {
        let warn = self.warn
        // The agent measures no server's clock: its tokens are in this machine's time.
        let clocks = ServerClocks(store: nil, reading: { BootClockReading.system() }, warn: warn)
        // The posture as the agent may read it (the firewall's ruleset as root), the desktop's settings from the caller's home.
        // The caller's files are read as the caller (a link to another user's settings is not followed as root).
        let posture = PostureSources(root: settings.postureRoot, effectiveUserID: geteuid(), home: user.home, xdgConfigHome: nil, cache: settings.cache,
                                     homeOwner: peer.uid == geteuid() ? nil : FileOwner(uid: peer.uid, gid: peer.gid))
        return DeviceTokenService(store: store, configuration: settings.configuration, clock: settings.clock, random: settings.random,
                                  serverClocks: clocks, posture: posture, warn: warn)
    }

    /// The claims a client may add: none the policy does not name, and never a measured or reserved one.
    func allowedClaims(_ claims: [GivenClaim]) throws(AgentClaimRefusal) -> [(String, String)] {
        var allowed = [(String, String)]()
        for claim in claims {
            if let problem = ClaimName.givenClaimProblem(with: claim.name) {
                throw AgentClaimRefusal(name: claim.name, reason: problem)
            }
            guard settings.policy.allowedClientClaims.contains(claim.name) else {
                throw AgentClaimRefusal(name: claim.name, reason: "the agent's policy (\(settings.policy.source ?? AgentPolicy.defaultPath)) "
                                        + (settings.policy.allowedClientClaims.isEmpty ? "lets clients add no claims"
                                           : "lets clients add only \(settings.policy.allowedClientClaims.joined(separator: ", "))"))
            }
            allowed.append((claim.name, claim.value))
        }
        return allowed
    }

    private func publicKey(_ peer: AgentPeer, user: AgentUsers.User) throws -> JSONObject {
        let device = try store(for: peer, user).loadKey()
        return ["publicKey": .string(device.key.publicKey.spkiBase64), "backend": .string(device.record.backend.rawValue),
                "fingerprint": .string(device.record.fingerprint)]
    }

    private func status(_ peer: AgentPeer, user: AgentUsers.User) throws -> JSONObject {
        let state = try store(for: peer, user).state()
        var key = JSONValue.null
        if let record = state.key {
            key = .object(["backend": .string(record.backend.rawValue), "fingerprint": .string(record.fingerprint), "createdAt": .string(record.createdAt)])
        }
        let registrations = state.registrations.map { JSONValue.object($0.withoutHolder.keystoreObject) }
        return ["keystore": .string(settings.keystore.path), "key": key, "registrations": .array(registrations),
                "policy": settings.policy.source.map(JSONValue.string) ?? .null]
    }

    private func token(_ peer: AgentPeer, user: AgentUsers.User, server: String?, deviceID: String?,
                       claims: [GivenClaim]) throws -> (MintedJWT, RegistrationRecord) {
        let added = try allowedClaims(claims)
        let store = store(for: peer, user)
        // Only the caller's registrations: a device id of anyone else's is not theirs to name.
        let state = try store.state()
        let registration: RegistrationRecord
        if let deviceID {
            guard let own = state.registrations.first(where: { $0.registrationId == deviceID }) else { throw AgentNotYourRegistration(deviceID: deviceID) }
            registration = own
        } else {
            guard let chosen = try RegistrationSelector.select(from: state, .server(server)).registration else { throw DeviceError.notRegistered(server: server) }
            registration = chosen
        }
        let token = try tokens(for: peer, user: user, store: store).mintedDeviceToken(for: .chosen(registration), addedClaims: added)
        return (token, registration)
    }

    private func registrationStep(_ peer: AgentPeer, user: AgentUsers.User, server: String, registrationID: String, challenge: String,
                                  requiredParams: [String], claims: [GivenClaim], now: Int64) throws -> (JSONObject, deviceDataJTI: String?) {
        let added = try allowedClaims(claims)
        let store = store(for: peer, user)
        let holder = Self.holder(peer, user)
        // Before anything is signed: an id another user holds is never answered for this one.
        try refuseAnothersRegistration(holder, store: store, registrationID: registrationID)
        let device = try store.loadKey()
        // Before anything is signed too: a registration that could not be recorded at COMPLETE is refused now, while the server has none.
        let others = device.state.registrations.filter { !RegistrationSelector.sameServer($0.server, server) }
        if others.count >= DeviceStore.maximumRegistrationsPerUser { throw AgentTooManyRegistrations(limit: DeviceStore.maximumRegistrationsPerUser, registeredAs: nil) }
        // ...and one the machine keystore has no room for, all its users' together (replacing one's own adds none).
        let everyones = try store.wholeState().registrations
        let replacing = everyones.contains { $0.belongs(to: holder, keystoreOwner: settings.keystore.ownerID) && RegistrationSelector.sameServer($0.server, server) }
        if !replacing && everyones.count >= DeviceStore.maximumRegistrations {
            throw AgentTooManyRegistrations(limit: DeviceStore.maximumRegistrations, registeredAs: nil, wholeMachine: true)
        }
        let service = tokens(for: peer, user: user, store: store)
        let (inputs, deviceDataJTI) = try RegistrationProof.answer(challenge: challenge, requiredParams: requiredParams,
                                                  minter: service.registrationMinter(key: device.key, server: server),
                                                  attributes: try service.attributes(addedClaims: added).attributes(posture: service.posture(backend: device.record.backend)))
        pending.removeAll { now - $0.answeredAt > Self.pendingMilliseconds || ($0.holder == holder && $0.registrationID == registrationID) }
        let own = pending.filter { $0.uid == peer.uid }
        if own.count >= Self.pendingPerUser, let oldest = own.first {
            pending.removeAll { $0.holder == oldest.holder && $0.registrationID == oldest.registrationID }
        }
        pending.append(PendingRegistration(holder: holder, server: server, registrationID: registrationID, keyFingerprint: device.record.fingerprint,
                                           answeredAt: now))
        var result = JSONObject()
        for (name, value) in inputs { result[name] = .string(value) }
        return (result, deviceDataJTI)
    }

    private func registrationComplete(_ peer: AgentPeer, user: AgentUsers.User, server: String, registrationID: String, flowType: String) throws -> JSONObject {
        let holder = Self.holder(peer, user)
        // Only a step this agent answered for this user: nobody records another's registration as theirs.
        guard let answered = pending.last(where: { $0.holder == holder && $0.registrationID == registrationID
                                                  && RegistrationSelector.sameServer($0.server, server) }) else {
            let registered = (try? store(for: peer, user).state().registrations.contains { RegistrationSelector.sameServer($0.server, server) }) ?? false
            throw AgentNoSuchStep(registrationID: registrationID, server: server, registeredThere: registered)
        }
        let record = RegistrationRecord(registrationId: registrationID, server: answered.server, flowType: flowType, keyFingerprint: answered.keyFingerprint,
                                        registeredAt: Timestamp.format(secondsSinceEpoch: settings.clock.secondsSinceEpoch()), uid: peer.uid,
                                        account: user.account)
        let store = store(for: peer, user)
        try refuseAnothersRegistration(holder, store: store, registrationID: registrationID)
        do {
            try store.recordRegistration(record)
        } catch DeviceError.tooManyRegistrations(let limit) {
            throw AgentTooManyRegistrations(limit: limit, registeredAs: (registrationID, answered.server))
        } catch DeviceError.keystoreFull(let limit) {
            throw AgentTooManyRegistrations(limit: limit, registeredAs: (registrationID, answered.server), wholeMachine: true)
        }
        pending.removeAll { $0.holder == holder && $0.registrationID == registrationID }
        return ["registration": .object(record.withoutHolder.keystoreObject), "backend": (try? store.state().key?.backend.rawValue).flatMap { $0 }.map(JSONValue.string) ?? .null]
    }

    /// A registration id is one device record at one server, and every user's records name the
    /// one machine key: an id another user holds (recorded, or a step answered for them) is never
    /// answered or recorded for this one, or its tokens would carry the other user's device trust.
    /// The id is the client's to send (the server's answer passes through it), so the agent checks it.
    private func refuseAnothersRegistration(_ holder: RegistrationHolder, store: DeviceStore, registrationID: String) throws {
        let owner = settings.keystore.ownerID
        // At any server: a token names its registration by id alone (`deviceId`), and carries no
        // audience, so an id held for another user at one server is theirs at every server.
        // And in any spelling a server may take for the same id: registration ids are UUIDs, which servers
        // (and their databases) compare without regard to case, and some without the hyphens.
        // And an id another user's registration had before it was forgotten (their `reset`, their
        // `register --replace`, root forgetting a departed account's), while the key is the same: the
        // server still has it as that user's device. Whose an id is: its uid, and the account that had it.
        let asked = Self.comparable(registrationID)
        let state = try store.wholeState()
        let recorded = state.registrations.contains { !$0.belongs(to: holder, keystoreOwner: owner) && Self.comparable($0.registrationId) == asked }
        // A former record without an account (root forgot an older agent's record by uid) is nobody's to record again.
        let forgotten = state.formerRegistrations.contains { ($0.account == nil || !holder.holds(uid: $0.uid, account: $0.account)) && Self.comparable($0.registrationId) == asked }
        let answered = pending.contains { $0.holder != holder && Self.comparable($0.registrationID) == asked }
        if recorded || forgotten || answered { throw AgentNotYourRegistration(deviceID: registrationID) }
    }

    /// A registration id as servers may compare it: lower case, without hyphens.
    static func comparable(_ registrationID: String) -> String {
        String(registrationID.lowercased().filter { $0 != "-" })
    }
}

/// A claim the agent does not add for a client: measured or reserved, or not one its policy allows (exit 2, naming it).
public struct AgentClaimRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    public let name: String
    public let reason: String

    public var description: String { classification.message }
}

extension AgentClaimRefusal: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(.usage, summary: "--claim \(name): \(reason)",
                            hint: ErrorHint("the devtrust agent adds no claim its administrator did not allow, and never replaces a measured one", joinedBy: "; "))
    }
}

/// `token --device-id ID` through the agent for an id that is not one of the caller's registrations (exit 3).
public struct AgentNotYourRegistration: Error, Equatable, Sendable, CustomStringConvertible {
    public let deviceID: String

    public var description: String { classification.message }
}

extension AgentNotYourRegistration: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(.notRegistered, summary: "\(deviceID) is not one of your registrations on this machine",
                            hint: ErrorHint("through the devtrust agent, a token names only a registration you made (`devtrust status` lists them)", joinedBy: "; "))
    }
}

/// A completion for a Device Registration step the agent did not answer for this user (or no longer
/// remembers: it restarted, or the step is older than `pendingMilliseconds`). The server's flow has
/// completed: it keeps a device record that the agent did not record.
public struct AgentNoSuchStep: Error, Equatable, Sendable, CustomStringConvertible {
    public let registrationID: String
    public let server: String
    /// Whether the user has a registration with that server already (then registering again replaces it).
    public let registeredThere: Bool

    public var description: String { classification.message }
}

extension AgentNoSuchStep: ClassifiedError {
    public var classification: ErrorClassification {
        let again = registeredThere ? "`devtrust register --replace --server \(server)`" : "`devtrust register --server \(server)`"
        return ErrorClassification(.failure, summary: "\(server) completed the registration \(registrationID), but the devtrust agent answered no Device Registration "
                                   + "step \(registrationID) for you (it restarted since, or the step was answered over an hour ago), so it recorded nothing",
                                   hint: ErrorHint("run \(again) again; the server keeps the device record \(registrationID): remove it at the server "
                                                   + "(the user's or an administrator's device list)", joinedBy: "; "))
    }
}

/// A user who has as many registrations as the agent keeps for one user, or a machine keystore that
/// holds as many as it keeps for all users together (`wholeMachine`; exit 1 either way), at the
/// Device Registration step (nothing signed, nothing registered) or, when one was recorded
/// meanwhile, at COMPLETE (`registeredAs`: the server's record, which the agent did not record).
public struct AgentTooManyRegistrations: Error, Sendable, CustomStringConvertible {
    public let limit: Int
    public let registeredAs: (id: String, server: String)?
    public var wholeMachine = false

    public var description: String { classification.message }
}

extension AgentTooManyRegistrations: ClassifiedError {
    public var classification: ErrorClassification {
        if wholeMachine {
            let full = "the devtrust agent keeps at most \(limit) registrations for all the users of this machine together, and holds that many"
            let steps = "ask the machine's administrator; a user forgets their own with `devtrust reset`, and registering again with a server "
                + "you are registered with replaces that one (`devtrust register --replace --server URL`)"
            guard let registeredAs else {
                return ErrorClassification(.failure, summary: full, hint: ErrorHint("nothing was signed or registered: " + steps, joinedBy: "; "))
            }
            return ErrorClassification(.failure, summary: full + ", so it did not record the registration \(registeredAs.id) that \(registeredAs.server) completed",
                                       hint: ErrorHint(steps + "; the server keeps the device record \(registeredAs.id): remove it at the server", joinedBy: "; "))
        }
        let steps = "`devtrust status` lists yours; `devtrust reset` forgets them all (after revoking your sign-ins), and registering again with "
            + "a server you are registered with replaces that one (`devtrust register --replace --server URL`)"
        guard let registeredAs else {
            return ErrorClassification(.failure, summary: "the devtrust agent keeps at most \(limit) registrations for one user of this machine, and you have that many",
                                       hint: ErrorHint("nothing was signed or registered: " + steps, joinedBy: "; "))
        }
        return ErrorClassification(.failure, summary: "the devtrust agent keeps at most \(limit) registrations for one user of this machine, and you have that many, "
                                   + "so it did not record the registration \(registeredAs.id) that \(registeredAs.server) completed",
                                   hint: ErrorHint(steps + "; the server keeps the device record \(registeredAs.id): remove it at the server", joinedBy: "; "))
    }
}

extension AgentService {
    /// The agent from its start to SIGTERM: the socket systemd passes (`LISTEN_FDS`), else its own
    /// at `socket`; the service over `settings`; the lines it has to say (that it listens, that
    /// there is no key yet, an audit line per decision, that it stopped) to `say`.
    public static func serve(_ settings: Settings, socket: String, environment: [String: String], say: @escaping (String) -> Void) throws {
        // The machine keystore is the agent's: refused as any keystore is when others can read it.
        let keystorePath = settings.keystore.path
        if try settings.keystore.load()?.key == nil {
            say("devtrust agent: warning: there is no device key in \(keystorePath) yet: `devtrust init --keystore \(keystorePath)` "
                + "(as the agent's user) makes one; until then clients are told so")
        }
        let listener = try AgentListener.activated(environment: environment) ?? AgentListener.bind(path: socket)
        defer { listener.close() }
        let termination = AgentServer.terminationPipe()
        guard termination >= 0 else { throw AgentListenerError.io(path: "a pipe", operation: "make", errno: errno) }
        // The service is made on the worker thread, which serves every request with it; its lines come back to the loop.
        let server = AgentServer(listener: listener.descriptor, termination: termination, say: say) { say in
            AgentService(settings: settings, audit: { say($0.line) }, warn: { say("devtrust agent: warning: " + $0) })
        }
        say("devtrust agent: listening on \(listener.description) for \(keystorePath) (policy: \(settings.policy.source ?? "none, the defaults"))")
        try server.run()
        say("devtrust agent: stopped")
    }
}
