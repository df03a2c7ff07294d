import DevtrustDevice
import DevtrustKeys

/// `reset`: deletes the key and the registrations (the TPM's shared storage root key stays).
enum ResetCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let yes = FlagOption<Self>("yes", "do not ask for confirmation")
        static let spec = CommandSpec(name: "reset", summary: "delete the device key and the registrations", options: [yes])

        var yes: Bool

        init(_ values: OptionValues<Self>) {
            yes = values[Self.yes]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let store = try context.deviceStore()
        let keystore = store.keystore
        let state = try store.state()
        guard state.key != nil || !state.registrations.isEmpty || !state.tpmPersistentHandles.isEmpty else {
            context.info("nothing to reset: there is no device key in \(keystore.path)")
            return
        }
        if !options.yes {
            guard context.terminal.inputIsTerminal else {
                throw UsageError("reset deletes the device key; confirm with --yes when not at a terminal", command: "reset")
            }
            let what = "the \(state.key?.backend.rawValue ?? "") device key and \(state.registrations.count) registration(s) in \(keystore.path)"
            let answer = context.terminal.readLine(prompt: "Delete \(what)? The device will have to be registered again. [y/N] ")
            // Declining is an answer, not a failure (as `rm -i` takes it).
            guard let answer, ["y", "yes"].contains(answer.lowercased()) else {
                context.info("reset cancelled: nothing deleted")
                return
            }
        }
        let outcome = try store.reset()
        let registrations = outcome.previous.registrations.count
        context.info("deleted the device key" + (registrations == 0 ? "" : " and \(registrations) registration(s)") + " from \(keystore.path)")
        // The persistent parent the key was made under, if it had one.
        let parent = outcome.previous.key?.tpmParent.flatMap(TPMParentRecord.init(serialized:))?.handle
            ?? outcome.previous.tpmPersistentHandles.first
        if let parent, TPMHandle.isPersistent(parent) {
            let handle = TPMHandle.format(parent)
            context.info("left the TPM's storage root key at \(handle) in place: keys of other keystores and programs (tpm2-openssl, systemd) may use it, and it holds no secret; if nothing does, `tpm2_evictcontrol -C o -c \(handle)` removes it")
        }
    }
}
