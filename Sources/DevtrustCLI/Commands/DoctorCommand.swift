import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignInService
import DevtrustSystem
import DevtrustTerminal

/// `doctor`: the checks a support engineer would ask for, each with a verdict,
/// what it found and the fix: the configuration file, the keystore's
/// permissions, the key loading and signing, the TPM (reachable, its device's
/// permissions, group tss), the libraries loaded on demand, the CA file, and
/// the clock against each server's. Reads only (no lock, no keystore write, no
/// prompt). Whatever talks to a TPM or a server runs in a child process with a
/// deadline (`BoundedProbes`): a TCTI that accepts and never answers, or a
/// server that never answers, makes a failed or warned check, not a hung
/// doctor; the servers are asked several at once, within an overall budget.
/// A check that throws is a failed check; the others still run. Exit 0 unless
/// a check fails (warn and skip do not).
enum DoctorCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "doctor", summary: "check the TPM, keystore, key, libraries, configuration and server clocks",
                                      options: [])

        init(_ values: OptionValues<Self>) {}
    }

    /// How long loading the key and signing with it may take (several TPM commands; a storage root key to make again).
    static let keySeconds = 10.0
    /// How long asking the TPM what it is may take (a few GetCapability commands).
    static let describeSeconds = 5.0
    /// Each server's GET: curl's own timeout, and a margin before its process is killed.
    static let clockSeconds = Double(ClockDiagnosis.timeoutMilliseconds) / 1000 + 3
    /// Servers asked at once, and the time after which no more are asked.
    static let clockParallel = 8
    static let clockBudgetSeconds = 30.0

    static func run(_ context: CommandContext, _ options: Options) throws {
        // The report goes to stdout: its marks in colour only when stdout is a terminal (and NO_COLOR is unset).
        let style = TerminalStyle(errorIsTerminal: context.terminal.outputIsTerminal, variables: context.environment.variables)
        var checks = [DoctorCheck]()
        func record(_ made: [DoctorCheck]) {
            checks += made
            if !context.json { for check in made { context.terminal.writeOutput(check.text(style) + "\n") } }
        }
        let probes = BoundedProbes(isolated: context.environment.isolatesProbes)
        let userID = context.environment.effectiveUserID

        let configuration = ConfigurationDiagnosis(loader: ConfigurationLoader(explicitPath: context.global.config, environment: context.environment.variables),
                                                   profileProblem: { profileProblem(context, $0) }, userID: userID).run()
        record([configuration.check])

        let keystore = KeystoreDiagnosis(keystore: Result { try context.keystore() }, userID: userID)
        let permissions = keystore.permissions()
        record([permissions.check])
        let state: KeystoreState? = (try? permissions.state.get()) ?? nil
        let keyKnown = (try? permissions.state.get()) != nil
        // The TPM the key is used in: --tcti or a TCTI variable, else the one recorded with it, else the default.
        let recorded = state?.key?.tcti
        let selection = context.tpmSelection.forKey(recordedTCTI: recorded)
        let backend = state?.key?.backend
        let override = TCTIOverride.of(selection, global: context.global.tcti, environment: context.environment.variables, recorded: recorded)

        let key = keySigns(context, keystore, state: permissions.state, permissionsFailed: permissions.check.verdict == .fail,
                           selection: selection, backend: backend, override: override, probes: probes)
        record([key.check])

        let tpm = TPMDiagnosis(selection: selection, keyBackend: backend, keyKnown: keyKnown,
                               user: DoctorUser.current(uid: userID), override: override)
        let reachable: DoctorCheck
        if key.tpmUnanswered {
            // The same TPM did not answer the key's commands: asking again would only wait as long again.
            reachable = tpm.unanswered(seconds: keySeconds)
        } else {
            switch probes.run(seconds: describeSeconds, { tpm.reachable().json }) {
            case let .finished(value): reachable = DoctorCheck(json: value) ?? tpm.unanswered(seconds: describeSeconds)
            case .timedOut, .notStarted: reachable = tpm.unanswered(seconds: describeSeconds)
            case let .failed(reason):
                reachable = DoctorCheck(TPMDiagnosis.reachableID, TPMDiagnosis.reachableTitle, backend == .tpm ? .fail : .warn,
                                        "asking the TPM at \(selection.candidates.joined(separator: " or ")) ended without an answer (\(reason))",
                                        fix: "run `devtrust status`; if it fails the same way, report it")
            }
        }
        record([reachable, tpm.devicePermissions(), tpm.group()])
        record(LibraryDiagnosis(selection: selection, keyBackend: backend, tctiProbe: LibraryDiagnosis.tctiModuleProbe).checks())

        let settings = HTTPClientSettings(context, configuration: configuration.configuration)
        if let caFile = settings.options.caFile {
            record([CAFileDiagnosis.check(caFile, source: context.global.caFile != nil ? "--ca-file" : "DEVTRUST_CA_FILE")])
        }
        record(clockChecks(context, state: permissions.state, settings: settings, probes: probes))

        let report = DoctorReport(checks: checks)
        if context.json {
            context.output(JSONWriter.string(report.json))
        } else {
            context.output(report.summary)
        }
        guard report.ok else {
            let failed = report.failed.map(\.id)
            throw CLIError.failure("\(failed.count) of \(checks.count) checks failed (\(failed.joined(separator: ", "))); "
                                   + (context.json ? "each has its fix in the report" : "each has its fix above"))
        }
    }

    /// Why `login --profile NAME` refuses a profile, as it would say it; nil when it takes it.
    private static func profileProblem(_ context: CommandContext, _ name: String) -> (detail: String, fix: String?)? {
        do {
            _ = try SignInTarget(.init(server: nil, discovery: nil, clientID: nil, redirectURI: nil, scope: nil, par: false, profile: name),
                                 configuration: try context.configuration(), command: "login", needsClient: false)
            return nil
        } catch {
            let report = ErrorReport.from(error)
            return report.hint == nil ? (report.message, nil) : (report.summary, report.hint)
        }
    }

    /// `key.signs`, in a child process with a deadline. Where a TCTI override is in effect and the key
    /// fails through it, the key is tried through the TPM it would use without it too, so that the
    /// check says which TPM is wrong: the key is never called lost because another TPM refuses it.
    private static func keySigns(_ context: CommandContext, _ keystore: KeystoreDiagnosis, state: Result<KeystoreState?, any Error>,
                                 permissionsFailed: Bool, selection: TPMSelection, backend: KeyBackend?, override: TCTIOverride?,
                                 probes: BoundedProbes) -> (check: DoctorCheck, tpmUnanswered: Bool) {
        let environment = context.environment
        let store = try? context.deviceStore()
        let through = selection.candidates.joined(separator: " or ")
        func probe(_ store: DeviceStore?, through: String) -> (check: DoctorCheck, destroysKey: Bool, timedOut: Bool) {
            let outcome = probes.run(seconds: keySeconds) {
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
                    ? "the TPM at \(through) did not answer within \(Int(keySeconds)) s while loading the key and signing with it (its connection was accepted, but no answer came)"
                    : "loading the key and signing with it did not finish within \(Int(keySeconds)) s"
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
        let own = DeviceStore(keystore: store.keystore, clock: environment.clock, tpm: override.withoutOverride, random: environment.random, tpmNotices: TPMNotices())
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

    private static func clockChecks(_ context: CommandContext, state: Result<KeystoreState?, any Error>, settings: HTTPClientSettings,
                                    probes: BoundedProbes) -> [DoctorCheck] {
        let id = "clock"
        guard case let .success(loaded) = state else {
            return [DoctorCheck(id, ClockDiagnosis.title, .skip, "the keystore cannot be read (see \(KeystoreDiagnosis.permissionsID)): no servers to compare the clock with")]
        }
        let servers = loaded.map(ClockDiagnosis.servers(of:)) ?? []
        guard !servers.isEmpty else {
            return [DoctorCheck(id, ClockDiagnosis.title, .skip, "no registrations or sign-ins: no server to compare the clock with")]
        }
        var http: any HTTPClient = CurlHTTPClient(options: ClockDiagnosis.options(settings))
        if context.verbose && !context.quiet { http = VerboseHTTPClient(inner: http, say: { context.detail($0) }) }
        let bootClock = context.environment.bootClock
        let clocks = context.clocks
        let diagnosis = ClockDiagnosis(http: http, now: { bootClock().wall }, correctsTokens: { clocks.correction(for: $0) != nil })
        let jobs = servers.map { server in BoundedProbes.Job(seconds: clockSeconds) { diagnosis.check(server).json } }
        let outcomes = probes.run(jobs, parallel: clockParallel, budget: clockBudgetSeconds)
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
                                   "not asked: doctor gives the clock checks \(Int(budget)) s in all, \(clockParallel) servers at a time, and the servers before it took them")
            case let .failed(reason):
                return DoctorCheck(checkID, ClockDiagnosis.title, .warn, "the check of \(server.named) ended without a result (\(reason))",
                                   fix: "run `devtrust doctor` again; if it fails the same way, report it")
            }
        }
    }
}

/// `tls.ca-file`, when `--ca-file` or DEVTRUST_CA_FILE names one: the file every
/// HTTPS request trusts instead of the system's store is readable and holds PEM
/// certificates (curl would fail every request to an https:// server otherwise).
enum CAFileDiagnosis {
    static let id = "tls.ca-file"
    static let title = "CA file for HTTPS"

    static func check(_ path: String, source: String) -> DoctorCheck {
        let fix = "point \(source) at a PEM file of the CA certificates to trust, or leave it unset to trust the system's store"
        let bytes: [UInt8]
        do {
            bytes = try FileReader.read(path, limit: 16 << 20)
        } catch {
            return DoctorCheck(id, title, .fail, "\(path), the CA file \(source) names, cannot be read (\(error.reason)): every HTTPS request fails", fix: fix)
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map { $0.trimmingCharacters() }
        var certificates = 0, damaged = 0
        var body: String?
        for line in lines {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----", let text = body {
                if let der = try? Base64.decode(text), der.first == 0x30, der.count > 64 { certificates += 1 } else { damaged += 1 }
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        guard certificates > 0, damaged == 0, body == nil else {
            let what = certificates == 0 && damaged == 0 ? "holds no PEM certificate (-----BEGIN CERTIFICATE-----)" : "holds a damaged PEM certificate"
            return DoctorCheck(id, title, .fail, "\(path), the CA file \(source) names, \(what): every HTTPS request fails", fix: fix)
        }
        return DoctorCheck(id, title, .pass, "\(path) (\(source)) holds \(certificates) PEM certificate\(certificates == 1 ? "" : "s")")
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
