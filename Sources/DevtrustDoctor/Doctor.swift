import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignInService
import DevtrustTerminal

/// `doctor`'s checks, the ones a support engineer would ask for, each with a verdict, what it
/// found and the fix: the configuration file, the keystore's permissions, the key loading and
/// signing, the TPM (reachable, its device's permissions, group tss), the libraries loaded on
/// demand, the CA file, and the clock against each server's. Reads only (no lock, no keystore
/// write, no prompt). Whatever talks to a TPM or a server runs in a child process with a deadline
/// (`BoundedProbes`): a TCTI that accepts and never answers, or a server that never answers,
/// makes a failed or warned check, not a hung doctor; the servers are asked several at once,
/// within an overall budget. A check that throws is a failed check; the others still run.
/// The front end renders the checks (`run`'s `record`, as each is made) and the report.
package struct Doctor {
    /// How long loading the key and signing with it, and asking the TPM what it is, may take.
    static let keySeconds = SigningDeadline.probeKeySeconds
    static let describeSeconds = SigningDeadline.probeDescribeSeconds
    /// Each server's GET: curl's own timeout, and a margin before its process is killed.
    package static let clockSeconds = Double(ClockDiagnosis.timeoutMilliseconds) / 1000 + 3
    /// Servers asked at once, and the time after which no more are asked.
    package static let clockParallel = 8
    package static let clockBudgetSeconds = 30.0

    /// The configuration file in effect, as every command finds it.
    package let configuration: ConfigurationLoader
    /// The keystore, or why it cannot be named (no HOME).
    package let keystore: Result<Keystore, any Error>
    /// The device store over that keystore, as the other commands open it.
    package let deviceStore: () throws -> DeviceStore
    package let userID: UInt32
    /// The TPM as --tcti and the TCTI variables choose it; `explicitTCTI` is --tcti.
    package let tpmSelection: TPMSelection
    package let explicitTCTI: String?
    package let variables: [String: String]
    /// The HTTP options of every command, for a configuration; and what names the CA file, if one is named.
    package let httpOptions: (Configuration) -> HTTPOptions
    package let caFileSource: String
    /// The clock checks' client with those options, shortened (`ClockDiagnosis.options`): it measures no
    /// server's clock for the tokens; the front end may say its requests (--verbose).
    package let httpClient: (HTTPOptions) -> any HTTPClient
    /// The servers' clocks: whether devtrust's tokens for one are written in its time now.
    package let clocks: ServerClocks
    /// This machine's wall clock (with the boot clock, for clock records).
    package let bootClock: @Sendable () -> BootClockReading
    package let probes: BoundedProbes
    /// The system agent's check, when it stands in for the device key (nil: the keystore's key is
    /// the one used): made by the front end, which knows the agent's client, from the user's own
    /// keystore's state and path (a key there is one the agent stands in for).
    package var agentCheck: ((_ own: KeystoreState?, _ ownPath: String?) -> DoctorCheck)?

    package init(configuration: ConfigurationLoader, keystore: Result<Keystore, any Error>, deviceStore: @escaping () throws -> DeviceStore,
                 userID: UInt32, tpmSelection: TPMSelection, explicitTCTI: String?, variables: [String: String],
                 httpOptions: @escaping (Configuration) -> HTTPOptions, caFileSource: String, httpClient: @escaping (HTTPOptions) -> any HTTPClient,
                 clocks: ServerClocks, bootClock: @escaping @Sendable () -> BootClockReading, probes: BoundedProbes) {
        self.configuration = configuration
        self.keystore = keystore
        self.deviceStore = deviceStore
        self.userID = userID
        self.tpmSelection = tpmSelection
        self.explicitTCTI = explicitTCTI
        self.variables = variables
        self.httpOptions = httpOptions
        self.caFileSource = caFileSource
        self.httpClient = httpClient
        self.clocks = clocks
        self.bootClock = bootClock
        self.probes = probes
    }

    /// The id and title of the agent's check.
    package static let agentID = "agent"
    package static let agentTitle = "system agent"

    /// Every check, in order; `record` gets each group as soon as it is made (a front end prints
    /// them as they come: the slow ones, the TPM's and the servers', come last).
    package func run(record: ([DoctorCheck]) -> Void) -> DoctorReport {
        var checks = [DoctorCheck]()
        func add(_ made: [DoctorCheck]) {
            checks += made
            record(made)
        }
        let configuration = ConfigurationDiagnosis(loader: self.configuration, profileProblem: Self.profileProblem, userID: userID).run()
        add([configuration.check])

        let keystore = KeystoreDiagnosis(keystore: self.keystore, userID: userID)
        let permissions = keystore.permissions()
        // Through the agent, a keystore of one's own that is not there yet needs nothing done.
        add([agentCheck != nil && permissions.check.verdict == .skip ? permissions.check.with(fix: .some(nil)) : permissions.check])
        let state: KeystoreState? = (try? permissions.state.get()) ?? nil
        let keyKnown = (try? permissions.state.get()) != nil
        // The TPM the key is used in: --tcti or a TCTI variable, else the one recorded with it, else the default.
        let recorded = state?.key?.tcti
        let selection = tpmSelection.forKey(recordedTCTI: recorded)
        let backend = state?.key?.backend
        let override = TCTIOverride.of(selection, global: explicitTCTI, environment: variables, recorded: recorded)

        let key = keySigns(keystore, state: permissions.state, permissionsFailed: permissions.check.verdict == .fail,
                           selection: selection, backend: backend, override: override)
        if let agentCheck {
            // The agent's machine key is the one used: no key of one's own is nothing to fix.
            let ownPath = try? self.keystore.get().path
            let noOwnKey = DoctorCheck(KeystoreDiagnosis.keyID, KeystoreDiagnosis.keyTitle, .skip,
                                       "no device key of your own in \(ownPath ?? "your keystore"): the devtrust agent's machine key is used (see \(Self.agentID))")
            let readWithoutKey = if case .success = permissions.state { state?.key == nil } else { false }
            add([readWithoutKey ? noOwnKey : key.check, agentCheck(state, ownPath)])
        } else {
            add([key.check])
        }

        let tpm = TPMDiagnosis(selection: selection, keyBackend: backend, keyKnown: keyKnown,
                               user: DoctorUser.current(uid: userID), override: override)
        let reachable: DoctorCheck
        if key.tpmUnanswered {
            // The same TPM did not answer the key's commands: asking again would only wait as long again.
            reachable = tpm.unanswered(seconds: Self.keySeconds)
        } else {
            switch probes.run(seconds: Self.describeSeconds, { tpm.reachable().json }) {
            case let .finished(value): reachable = DoctorCheck(json: value) ?? tpm.unanswered(seconds: Self.describeSeconds)
            case .timedOut, .notStarted: reachable = tpm.unanswered(seconds: Self.describeSeconds)
            case let .failed(reason):
                reachable = DoctorCheck(TPMDiagnosis.reachableID, TPMDiagnosis.reachableTitle, backend == .tpm ? .fail : .warn,
                                        "asking the TPM at \(selection.candidates.joined(separator: " or ")) ended without an answer (\(reason))",
                                        fix: "run `devtrust status`; if it fails the same way, report it")
            }
        }
        add([reachable, tpm.devicePermissions(), tpm.group()])
        add(LibraryDiagnosis(selection: selection, keyBackend: backend, tctiProbe: LibraryDiagnosis.tctiModuleProbe).checks())

        let options = httpOptions(configuration.configuration)
        if let caFile = options.caFile {
            add([CAFileDiagnosis.check(caFile, source: caFileSource)])
        }
        add(clockChecks(state: permissions.state, options: options))
        return DoctorReport(checks: checks)
    }

    /// Why `login --profile NAME` refuses a profile of `configuration`, as it would say it; nil when it takes it.
    static func profileProblem(_ configuration: Configuration, _ name: String) -> (detail: String, fix: String?)? {
        do {
            _ = try SignInTarget(.init(server: nil, discovery: nil, clientID: nil, redirectURI: nil, scope: nil, par: false, profile: name),
                                 configuration: configuration, command: "login", needsClient: false)
            return nil
        } catch {
            let report = ErrorReport.from(error)
            return report.hint == nil ? (report.message, nil) : (report.summary, report.hint)
        }
    }

    /// `key.signs`, in a child process with a deadline. Where a TCTI override is in effect and the key
    /// fails through it, the key is tried through the TPM it would use without it too, so that the
    /// check says which TPM is wrong: the key is never called lost because another TPM refuses it.
    private func keySigns(_ keystore: KeystoreDiagnosis, state: Result<KeystoreState?, any Error>, permissionsFailed: Bool,
                          selection: TPMSelection, backend: KeyBackend?, override: TCTIOverride?) -> (check: DoctorCheck, tpmUnanswered: Bool) {
        let store = try? deviceStore()
        let through = selection.candidates.joined(separator: " or ")
        func probe(_ store: DeviceStore?, through: String) -> (check: DoctorCheck, destroysKey: Bool, timedOut: Bool) {
            let outcome = probes.run(seconds: Self.keySeconds) {
                let result = keystore.keySigns(state: state, store: store, permissionsFailed: permissionsFailed)
                return .object(["check": result.check.json, "destroysKey": .bool(result.destroysKey)])
            }
            switch outcome {
            case let .finished(value):
                if let object = value.objectValue, let check = object["check"].flatMap(DoctorCheck.init(json:)) {
                    return (check, object["destroysKey"]?.boolValue ?? false, false)
                }
                return (DoctorCheck(KeystoreDiagnosis.keyID, KeystoreDiagnosis.keyTitle, .fail, "the key check gave no result", fix: "run `devtrust status`"), false, false)
            case .timedOut, .notStarted:
                let detail = backend == .tpm
                    ? "the TPM at \(through) did not answer within \(Int(Self.keySeconds)) s while loading the key and signing with it (its connection was accepted, but no answer came)"
                    : "loading the key and signing with it did not finish within \(Int(Self.keySeconds)) s"
                return (DoctorCheck(KeystoreDiagnosis.keyID, KeystoreDiagnosis.keyTitle, .fail, detail,
                                    fix: "check that the TPM (or its resource manager or simulator) at \(through) is working: restart it, or name another one with --tcti"),
                        false, backend == .tpm)
            case let .failed(reason):
                return (DoctorCheck(KeystoreDiagnosis.keyID, KeystoreDiagnosis.keyTitle, .fail, "loading the key and signing with it ended without a result (\(reason))",
                                    fix: "run `devtrust status`; if it fails the same way, report it"), false, false)
            }
        }
        let primary = probe(store, through: through)
        guard let override, backend == .tpm, primary.check.verdict == .fail, let store else { return (primary.check, primary.timedOut) }
        var own = DeviceStore(keystore: store.keystore, clock: store.clock, tpm: override.withoutOverride, random: store.random, tpmNotices: TPMNotices())
        own.keyInUse = store.keyInUse
        let ownTCTI = override.withoutOverride.candidates.joined(separator: " or ")
        let alternative = probe(own, through: ownTCTI)
        let overridden = "\(override.described). Through \(override.tcti): \(primary.check.detail)"
        let check: DoctorCheck
        if alternative.check.verdict != .fail {
            check = primary.check.with(detail: DoctorText.joined([overridden, "through \(ownTCTI), the key's own TPM, it loads and signs"]),
                                       fix: .some("\(override.undo) (the key's TPM is \(ownTCTI)), or give --tcti \(override.withoutOverride.candidates[0])"))
        } else {
            let both = DoctorText.joined([overridden, "through \(ownTCTI) (without \(override.source)): \(alternative.check.detail)"])
            let fix: String
            if override.recorded != nil {
                // The recorded TPM is the key's: what it says is what holds for the key.
                fix = "\(override.undo): the key's TPM is \(ownTCTI); " + (alternative.check.fix ?? "see `devtrust status`")
            } else if primary.destroysKey {
                fix = "check that \(override.tcti) is the TPM the key was made in (the keystore does not record which): another TPM refuses every key it did not make, and the key is not lost for that"
            } else {
                fix = primary.check.fix ?? "check the TCTI"
            }
            check = primary.check.with(detail: both, fix: .some(fix))
        }
        // tpm.reachable asks the TCTI in effect: the primary's.
        return (check, primary.timedOut)
    }

    private func clockChecks(state: Result<KeystoreState?, any Error>, options: HTTPOptions) -> [DoctorCheck] {
        let id = "clock"
        guard case let .success(loaded) = state else {
            return [DoctorCheck(id, ClockDiagnosis.title, .skip, "the keystore cannot be read (see \(KeystoreDiagnosis.permissionsID)): no servers to compare the clock with")]
        }
        let servers = loaded.map(ClockDiagnosis.servers(of:)) ?? []
        guard !servers.isEmpty else {
            return [DoctorCheck(id, ClockDiagnosis.title, .skip, "no registrations or sign-ins: no server to compare the clock with")]
        }
        let http = httpClient(ClockDiagnosis.options(options))
        let bootClock = self.bootClock
        let clocks = self.clocks
        let diagnosis = ClockDiagnosis(http: http, now: { bootClock().wall }, correctsTokens: { clocks.correction(for: $0) != nil })
        let jobs = servers.map { server in BoundedProbes.Job(seconds: Self.clockSeconds) { diagnosis.check(server).json } }
        let outcomes = probes.run(jobs, parallel: Self.clockParallel, budget: Self.clockBudgetSeconds)
        return zip(servers, outcomes).map { server, outcome in
            let checkID = ClockDiagnosis.id(server)
            switch outcome {
            case let .finished(value):
                return DoctorCheck(json: value) ?? DoctorCheck(checkID, ClockDiagnosis.title, .warn, "the check of \(server.named) gave no result", fix: "run `devtrust doctor` again")
            case let .timedOut(seconds):
                return DoctorCheck(checkID, ClockDiagnosis.title, .warn, "\(server.named) did not answer within \(Int(seconds)) s, so its clock cannot be compared",
                                   fix: "check that this machine reaches \(server.origin) (network, proxy), then run `devtrust doctor` again")
            case let .notStarted(budget):
                return DoctorCheck(checkID, ClockDiagnosis.title, .skip,
                                   "not asked: doctor gives the clock checks \(Int(budget)) s in all, \(Self.clockParallel) servers at a time, and the servers before it took them")
            case let .failed(reason):
                return DoctorCheck(checkID, ClockDiagnosis.title, .warn, "the check of \(server.named) ended without a result (\(reason))",
                                   fix: "run `devtrust doctor` again; if it fails the same way, report it")
            }
        }
    }
}
