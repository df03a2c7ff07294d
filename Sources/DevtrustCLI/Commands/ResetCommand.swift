import DevtrustDevice
import DevtrustKeys

/// `reset`: deletes the key, the registrations, and the TPM objects devtrust made.
enum ResetCommand {
    static func run(_ context: CommandContext) throws {
        let store = try context.deviceStore()
        let keystore = store.keystore
        let state = try store.state()
        guard state.key != nil || !state.registrations.isEmpty || !state.tpmPersistentHandles.isEmpty else {
            context.info("nothing to reset: there is no device key in \(keystore.path)")
            return
        }
        if !context.arguments.has("yes") {
            guard context.terminal.inputIsTerminal else {
                throw UsageError("reset deletes the device key; confirm with --yes when not at a terminal", command: "reset")
            }
            let what = "the \(state.key?.backend.rawValue ?? "") device key and \(state.registrations.count) registration(s) in \(keystore.path)"
            let answer = context.terminal.readLine(prompt: "Delete \(what)? The device will have to be registered again. [y/N] ")
            guard let answer, ["y", "yes"].contains(answer.lowercased()) else {
                throw CLIError.failure("reset cancelled; nothing was deleted")
            }
        }
        let outcome = try store.reset()
        let registrations = outcome.previous.registrations.count
        context.info("deleted the device key" + (registrations == 0 ? "" : " and \(registrations) registration(s)") + " from \(keystore.path)")
        for handle in outcome.evictedHandles {
            context.info("removed the TPM storage key devtrust had made persistent at \(TPMHandle.format(handle))")
        }
        if let problem = outcome.tpmProblem, !outcome.remainingHandles.isEmpty {
            context.warn("could not remove the TPM objects devtrust made (\(outcome.remainingHandles.map(TPMHandle.format).joined(separator: ", "))): \(problem); `devtrust reset` again removes them once the TPM answers")
        }
    }
}
