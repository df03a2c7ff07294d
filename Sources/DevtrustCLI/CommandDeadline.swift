import DevtrustCore
import DevtrustErrors
import DevtrustTerminal

extension SigningDeadline {
    /// A command's deadline (`SigningDeadline.commandSeconds`: token, device-data, sign-challenge and
    /// dpop-proof, a DPoP sign-in's proofs), ending while it does `what` with the error a TPM failure
    /// gets (exit 6). Its words are made here, both ways they may look; which one stderr gets is
    /// decided only if the deadline passes: asking now whether stderr is a terminal would cost every
    /// `devtrust token` a system call it otherwise never makes.
    static func command(_ context: CommandContext, doing what: String) -> SigningDeadline {
        let report = ErrorReport(ErrorClassification(.tpm, summary: "the TPM did not answer within \(commandSeconds) s (\(what))",
                                                     hint: ErrorHint("check that the TPM, its resource manager or the simulator is working (`devtrust doctor` checks it), then try again",
                                                                     joinedBy: ": ")))
        let exitStatus = report.exitCode.rawValue
        guard !context.json else {
            return .command(error: Array(report.text(style: .plain, verbose: false, json: true).utf8), errorOnTerminal: nil, exitStatus: exitStatus)
        }
        // As `ErrorReport.text` writes them, made printable once.
        let lines = report.humanLines(verbose: false)
        let onTerminal = TerminalStyle.coloursTerminals(context.environment.variables)
            ? Array((TerminalStyle(usesColour: true).error(lines.failed) + lines.rest).utf8) : nil
        return .command(error: Array((lines.failed + lines.rest).utf8), errorOnTerminal: onTerminal, exitStatus: exitStatus)
    }
}
