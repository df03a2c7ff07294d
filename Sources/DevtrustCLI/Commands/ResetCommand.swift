import DevtrustDevice

/// `reset`: deletes the key and the registrations, after confirmation.
enum ResetCommand {
    static func run(_ context: CommandContext) throws {
        let keystore = try context.keystore()
        let store = DeviceStore(keystore: keystore)
        let state = try store.state()
        guard state.key != nil || !state.registrations.isEmpty else {
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
        let removed = try store.reset()
        context.info("deleted the device key" + (removed.registrations.isEmpty ? "" : " and \(removed.registrations.count) registration(s)") + " from \(keystore.path)")
    }
}
