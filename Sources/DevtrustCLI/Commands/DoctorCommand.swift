import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore

/// `doctor`: the checks a support engineer would ask for, each with a verdict,
/// what it found and the fix: the configuration file, the keystore's
/// permissions, the key loading and signing, the TPM (reachable, its device's
/// permissions, group tss), the libraries loaded on demand, and the clock
/// against each server's. Reads only (no lock, no keystore write, no prompt),
/// and every network check is bounded. A check that throws is a failed check;
/// the others still run. Exit 0 unless a check fails (warn and skip do not).
enum DoctorCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "doctor", summary: "check the TPM, keystore, key, libraries, configuration and server clocks",
                                      options: [])

        init(_ values: OptionValues<Self>) {}
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        var checks = [DoctorCheck]()
        func record(_ made: [DoctorCheck]) {
            checks += made
            if !context.json { for check in made { context.output(check.text) } }
        }

        let configuration = ConfigurationDiagnosis(loader: ConfigurationLoader(explicitPath: context.global.config, environment: context.environment.variables)).run()
        record([configuration.check])

        let keystore = KeystoreDiagnosis(keystore: Result { try context.keystore() })
        let permissions = keystore.permissions()
        record([permissions.check])
        let store = try? context.deviceStore()
        record([keystore.keySigns(state: permissions.state, store: store)])

        let state: KeystoreState?
        let keyKnown: Bool
        switch permissions.state {
        case let .success(loaded): (state, keyKnown) = (loaded, true)
        case .failure: (state, keyKnown) = (nil, false)
        }
        // The TPM the key is used in: --tcti or a TCTI variable, else the one recorded with it, else the default.
        let selection = context.tpmSelection.forKey(recordedTCTI: state?.key?.tcti)
        let backend = state?.key?.backend
        record(TPMDiagnosis(selection: selection, keyBackend: backend, keyKnown: keyKnown,
                            user: DoctorUser.current(uid: context.environment.effectiveUserID)).checks())
        record(LibraryDiagnosis(selection: selection, keyBackend: backend, probe: LibraryDiagnosis.dlopenProbe).checks())

        record(clockChecks(context, state: permissions.state, configuration: configuration.configuration))

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

    private static func clockChecks(_ context: CommandContext, state: Result<KeystoreState?, any Error>, configuration: Configuration) -> [DoctorCheck] {
        let id = "clock"
        guard case let .success(loaded) = state else {
            return [DoctorCheck(id, ClockDiagnosis.title, .skip, "the keystore cannot be read (see \(KeystoreDiagnosis.permissionsID)): no servers to compare the clock with")]
        }
        let servers = loaded.map(ClockDiagnosis.servers(of:)) ?? []
        guard !servers.isEmpty else {
            return [DoctorCheck(id, ClockDiagnosis.title, .skip, "no registrations or sign-ins: no server to compare the clock with")]
        }
        let settings = HTTPClientSettings(context, configuration: configuration)
        var http: any HTTPClient = CurlHTTPClient(options: ClockDiagnosis.options(settings))
        if context.verbose && !context.quiet { http = VerboseHTTPClient(inner: http, say: { context.detail($0) }) }
        let bootClock = context.environment.bootClock
        let clocks = context.clocks
        let diagnosis = ClockDiagnosis(http: http, now: { bootClock().wall }, correctsTokens: { clocks.correction(for: $0) != nil })
        return servers.map(diagnosis.check)
    }
}
