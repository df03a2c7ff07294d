import DevtrustConfig
import DevtrustDoctor
import DevtrustEncoding
import DevtrustHTTP
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
        let doctor = Doctor(
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
