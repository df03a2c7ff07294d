import DevtrustAgent
import DevtrustConfig
import DevtrustDoctor
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore
import DevtrustTerminal

/// `doctor`: the checks a support engineer would ask for (`Doctor`, in DevtrustDoctor), each
/// printed as it is made, with a verdict, what it found and the fix; with --json one report.
/// Exit 0 unless a check fails (warn and skip do not).
enum DoctorCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "doctor", summary: "check the TPM, keystore, key, libraries, configuration and server clocks",
                                      options: [])

        init(_ values: OptionValues<Self>) {}
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        // The report goes to stdout: its marks in colour only when stdout is a terminal (and NO_COLOR is unset).
        let style = TerminalStyle(errorIsTerminal: context.terminal.outputIsTerminal, variables: context.environment.variables)
        let environment = context.environment
        var doctor = Doctor(
            configuration: ConfigurationLoader(explicitPath: context.global.config, environment: environment.variables),
            keystore: Result { try context.keystore() }, deviceStore: { try context.deviceStore() }, userID: environment.effectiveUserID,
            tpmSelection: context.tpmSelection, explicitTCTI: context.global.tcti, variables: environment.variables,
            httpOptions: { HTTPClientSettings(context, configuration: $0).options },
            caFileSource: context.global.caFile != nil ? "--ca-file" : "DEVTRUST_CA_FILE",
            httpClient: { options in
                let http = environment.httpTransport(options)
                return context.verbose && !context.quiet ? VerboseHTTPClient(inner: http, say: { context.detail($0) }) : http
            },
            clocks: context.clocks, bootClock: environment.bootClock, probes: BoundedProbes(isolated: environment.isolatesProbes))
        if case let .agent(agent) = try context.deviceAccess(command: Options.spec.name) {
            doctor.agentCheck = { own, ownPath in agentCheck(AgentClient(socket: agent.socket, timeoutMilliseconds: agentSeconds * 1000), own: own, ownPath: ownPath) }
        }
        let report = doctor.run { made in
            if !context.json { for check in made { context.terminal.writeOutput(check.text(style) + "\n") } }
        }
        if context.json {
            context.output(JSONWriter.string(report.json))
        } else {
            context.output(report.summary)
        }
        guard report.ok else {
            let failed = report.failed.map(\.id)
            throw CLIError.failure("\(failed.count) of \(report.checks.count) checks failed (\(failed.joined(separator: ", "))); "
                                   + (context.json ? "each has its fix in the report" : "each has its fix above"))
        }
    }
}

extension DoctorCommand {
    /// How long doctor waits for the agent's answer.
    static let agentSeconds = 5

    /// `agent`: the system agent answers, with the machine key (pass), or not (fail, with how to start
    /// it); a key in the user's own keystore, which the agent stands in for, is a warning with the way
    /// to keep using it or to move (as `status` says it).
    static func agentCheck(_ agent: AgentClient, own: KeystoreState?, ownPath: String?) -> DoctorCheck {
        let (id, title) = (Doctor.agentID, Doctor.agentTitle)
        let state: KeystoreState, keystore: String
        do {
            (state, keystore) = try agent.ownState()
        } catch {
            return DoctorCheck.failed(id, title, error, fallbackFix: "run `devtrust status` for the agent's answer")
        }
        guard let key = state.key else {
            let missing = AgentNoMachineKey(socket: agent.socket, keystore: keystore).classification
            return DoctorCheck(id, title, .fail, missing.summary, fix: missing.hint?.text)
        }
        let count = state.registrations.count
        let answers = "the devtrust agent at \(agent.socket) answers for the device key: the machine's \(key.backend.rawValue) key \(key.fingerprint) "
            + "in \(keystore), with \(count) registration\(count == 1 ? "" : "s") of yours"
        if let own, let ownPath, let note = OwnKeystoreNote(state: own, path: ownPath, agentKeystore: keystore, agentKey: key.fingerprint) {
            return DoctorCheck(id, title, .warn, answers + "; " + note.what, fix: note.way)
        }
        return DoctorCheck(id, title, .pass, answers)
    }
}

extension DoctorVerdict {
    /// The mark in colour where `style` has colour: pass green, warn yellow, fail red.
    func mark(_ style: TerminalStyle) -> String {
        switch self {
        case .pass: style.success(mark)
        case .warn: style.warning(mark)
        case .fail: style.error(mark)
        case .skip: mark
        }
    }
}

extension DoctorCheck {
    /// `[FAIL] id: detail`, and the fix indented below it; the mark in `style`'s colours.
    func text(_ style: TerminalStyle = .plain) -> String {
        var text = verdict.mark(style) + " " + TerminalText.printable("\(id): \(detail)")
        if let fix { text += "\n       fix: " + TerminalText.printable(fix) }
        return text
    }
}
