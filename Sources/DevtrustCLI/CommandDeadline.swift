import DevtrustCore

extension SigningDeadline {
    /// A command's deadline (`SigningDeadline.commandSeconds`: token, device-data, sign-challenge and
    /// dpop-proof, a DPoP sign-in's proofs), ending while it does `what` with the error a TPM failure
    /// gets (exit 6). Its words are made here, both ways they may look; which one stderr gets is
    /// decided only if the deadline passes: asking now whether stderr is a terminal would cost every
    /// `devtrust token` a system call it otherwise never makes.
    static func command(_ context: CommandContext, doing what: String) -> SigningDeadline {
        let report = ErrorReport(.tpm, summary: "the TPM did not answer within \(commandSeconds) s (\(what))",
                                 hint: "check that the TPM, its resource manager or the simulator is working (`devtrust doctor` checks it), then try again",
                                 joinedBy: ": ")
        let plain = report.text(style: .plain, verbose: false, json: context.json)
        let onTerminal = context.json ? nil : TerminalStyle.onTerminal(context.environment.variables).map { report.text(style: $0, verbose: false, json: false) }
        return .command(error: Array(plain.utf8), errorOnTerminal: onTerminal.map { Array($0.utf8) }, exitStatus: ExitCode.tpm.rawValue)
    }
}
