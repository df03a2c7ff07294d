import DevtrustAgent
import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustFlow
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeystore
import DevtrustSignInService
import DevtrustSystem

/// `register`: walks a Flow Execution API flow and answers its Device
/// Registration step; records the registration only when the flow completes.
enum RegisterCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let server = ValueOption<Self>("server", "URL", .url, "the server's base URL, e.g. https://api.asgardeo.io/t/acme")
        static let flowType = ValueOption<Self>("flow-type", "TYPE", .text, "REGISTRATION (default), INVITED_USER_REGISTRATION, ...")
        static let applicationID = ValueOption<Self>("application-id", "ID", .text, "the application the flow belongs to")
        static let input = RepeatableOption<Self>("input", "NAME=VALUE", .text, "a step input by its identifier (repeatable)")
        static let inputsFile = ValueOption<Self>("inputs", "FILE|-", .file, "a JSON object of string inputs (- reads stdin)")
        static let nonInteractive = FlagOption<Self>("non-interactive", "never prompt: fail naming what is missing")
        static let deviceModel = ValueOption<Self>("device-model", "TEXT", .text,
                                                   "the device's name at the server (default: DMI product name, else host name)")
        static let claims = RepeatableOption<Self>.claim
        static let open = FlagOption<Self>("open", "open a redirection step's URL in the desktop's browser")
        static let accept = RepeatableOption<Self>("accept", "ACTION_ID", .text,
                                                   "take this acceptance action (terms) when not at a terminal (repeatable)")
        static let replace = FlagOption<Self>("replace", "register again with a server this device is registered with (the server keeps the old device record)")
        static let spec = CommandSpec(name: "register", summary: "register this device with a server (Flow Execution API)",
                                      options: [server, flowType, applicationID, input, inputsFile, nonInteractive, deviceModel, claims, open,
                                                accept, replace],
                                      required: [.option(server)])

        var server: String?
        var flowType: String?
        var applicationID: String?
        var scriptedInputs: ScriptedInputs.Options
        var nonInteractive: Bool
        var deviceModel: String?
        var claims: [String]
        var open: Bool
        var accept: [String]
        var replace: Bool

        init(_ values: OptionValues<Self>) {
            server = values[Self.server]
            flowType = values[Self.flowType]
            applicationID = values[Self.applicationID]
            scriptedInputs = ScriptedInputs.Options(file: values[Self.inputsFile], inputs: values[Self.input])
            nonInteractive = values[Self.nonInteractive]
            deviceModel = values[Self.deviceModel]
            claims = values[Self.claims]
            open = values[Self.open]
            accept = values[Self.accept]
            replace = values[Self.replace]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        guard let serverText = options.server else {
            throw UsageError("--server URL is required (the server's base URL, e.g. https://api.asgardeo.io/t/acme)", command: "register")
        }
        try ServerBaseURL.check(serverText, command: "register")
        let server = try ServerURL(serverText)
        let flowType = options.flowType ?? "REGISTRATION"
        guard !flowType.isEmpty, flowType.allSatisfy({ $0.isUppercase || $0 == "_" }) else {
            throw UsageError("--flow-type must be a flow type such as REGISTRATION, not \"\(flowType)\"", command: "register")
        }
        let presets = try ScriptedInputs.read(options.scriptedInputs, context, command: "register")
        let claims = try ClaimOption.parse(options.claims, command: "register")
        let configuration = try context.configuration()

        // Where the key is: a keystore of one's own (made here when there is none), or the system agent's.
        let key: RegistrationKey
        switch try context.deviceAccess(command: Options.spec.name) {
        case let .agent(agent):
            key = try agentKey(agent, context, options, server: server, claims: claims)
        case .keystore:
            key = try ownKey(context, options, configuration: configuration, server: server, claims: claims)
        }
        let previous = key.previous
        if let previous, !options.replace {
            throw UsageError("this device is already registered with \(previous.server) as \(previous.registrationId) (registered \(previous.registeredAt)); "
                             + "`register --replace` registers it again, and the server keeps the old device record \(previous.registrationId): "
                             + Self.oldRecordAdvice, command: "register")
        }
        let http = HTTPClientSettings(context, configuration: configuration).client(context)
        let responder = key.responder
        let terminalInteraction = TerminalFlowInteraction(
            context: context, presets: presets,
            interactive: !options.nonInteractive && context.terminal.inputIsTerminal,
            openBrowser: options.open, acceptedActions: Set(options.accept))
        let interaction: any FlowInteraction = context.verbose && !context.quiet
            ? VerboseFlowInteraction(terminalInteraction, say: { context.detail($0) }) : terminalInteraction
        context.info("registering this device with \(server) (flow \(flowType))")
        let result = try RegistrationDriver(client: FlowClient(server: server, http: http), responder: responder, interaction: interaction)
            .run(flowType: flowType, applicationId: options.applicationID)

        let (record, backend) = try key.record(result)
        // A misspelt --accept is not silently ignored: the registration went another way than the user may think.
        var warned = Set<String>()
        for unused in options.accept where !terminalInteraction.usedAcceptedActions.contains(unused) && warned.insert(unused).inserted {
            let offered = terminalInteraction.offeredActions
            context.warn("--accept \(unused) was not used: no step of this flow offered that action"
                         + (offered.isEmpty ? " (no step offered any)" : " (the actions offered: \(offered.joined(separator: ", ")))"))
        }
        if let previous {
            context.warn("replaced the registration \(previous.registrationId) with \(previous.server): the server keeps that old device record; " + Self.oldRecordAdvice)
        }
        context.success("registered: this device is \(record.registrationId) at \(record.server) (\(backend) key \(record.keyFingerprint)); `devtrust token` now carries that id")
        if context.json {
            context.output(JSONWriter.string(.object([
                "registrationId": .string(record.registrationId), "server": .string(record.server),
                "flowType": .string(record.flowType), "keyFingerprint": .string(record.keyFingerprint),
                "backend": .string(backend), "registeredAt": .string(record.registeredAt),
                "replaced": previous.map { .string($0.registrationId) } ?? .null,
            ])))
        }
    }

    /// What answers the Device Registration step and records the registration at COMPLETE.
    struct RegistrationKey {
        /// The registration with this server there already, if any.
        let previous: RegistrationRecord?
        let responder: any DeviceRegistrationAnswering
        /// Records the completed flow's registration; the record and the key's backend.
        let record: (RegistrationResult) throws -> (RegistrationRecord, String)
    }

    /// The key in a keystore of one's own: made first when there is none, its deviceData from this
    /// run's posture, configuration and `--claim`s, the registration recorded in that keystore.
    private static func ownKey(_ context: CommandContext, _ options: Options, configuration: Configuration, server: ServerURL,
                               claims: [(String, String)]) throws -> RegistrationKey {
        let store = try context.deviceStore()
        if try store.state().key == nil {
            context.info("this device has no key yet; creating one first")
            // As `init` makes it (DeviceStore.initialize) and says it, but for its --json summary.
            try store.initialize(backend: .auto, force: false).report(context.withoutJSONOutput(), keystore: store.keystore, imported: false)
        }
        let device = try store.loadKey()
        // Before the first request: a second registration leaves the first device record at the server.
        let previous = device.state.registrations.first { RegistrationSelector.sameServer($0.server, server.description) }
        context.detail("keystore: \(store.keystore.path)")
        context.detail("key: \(device.record.backend.rawValue) key \(device.record.fingerprint)")
        // Before the first request: a key that cannot sign would fail only at
        // the device step, after the server created the account and sent an OTP.
        try device.key.checkCanSign(random: context.environment.random)
        let deviceTokens = context.deviceTokens(configuration, store: store)
        let attributes = try deviceTokens.gatheredAttributes(backend: device.record.backend, addedClaims: claims,
                                                             claimSources: context.verbose ? { for line in $0 { context.detail(line) } } : nil)
        // deviceData in the server's time, once its answers have told it.
        let responder = DeviceRegistrationResponder(
            minter: deviceTokens.registrationMinter(key: device.key, server: server.description),
            attributes: attributes,
            deviceModel: options.deviceModel ?? DeviceModel.detect())
        return RegistrationKey(previous: previous, responder: responder, record: { result in
            let record = RegistrationRecord(
                registrationId: result.registrationId, server: server.description, flowType: result.flowType,
                keyFingerprint: device.record.fingerprint,
                registeredAt: Timestamp.format(secondsSinceEpoch: context.environment.clock.secondsSinceEpoch()))
            try store.recordRegistration(record)
            return (record, device.record.backend.rawValue)
        })
    }

    /// The machine's key through the system agent: it answers the step (its challenge guard, its
    /// collectors, the claims its policy allows) and records the registration for this user at COMPLETE.
    private static func agentKey(_ agent: AgentClient, _ context: CommandContext, _ options: Options, server: ServerURL,
                                 claims: [(String, String)]) throws -> RegistrationKey {
        // Before the flow: a server the agent would not record is refused now, not after the user's prompts.
        if let problem = AgentRequest.serverURLProblem(server.description) {
            throw UsageError("--server \(server): through the devtrust agent, the server \(problem)", command: "register")
        }
        let (state, keystore) = try agent.ownState()
        let previous = state.registrations.first { RegistrationSelector.sameServer($0.server, server.description) }
        context.detail("the device key: the devtrust agent at \(agent.socket) (its keystore \(keystore))")
        let responder = AgentRegistrationResponder(agent: agent, server: server.description, claims: claims,
                                                   deviceModel: options.deviceModel ?? DeviceModel.detect())
        return RegistrationKey(previous: previous, responder: responder, record: { result in
            let answer = try agent.call(.registrationComplete(server: server.description, registrationID: result.registrationId, flowType: result.flowType))
            guard let object = answer["registration"]?.objectValue, let id = object["registrationId"]?.stringValue,
                  let fingerprint = object["keyFingerprint"]?.stringValue else {
                throw AgentUnavailable(socket: agent.socket, reason: .unreadableReply("no registration in its answer"))
            }
            let record = RegistrationRecord(registrationId: id, server: object["server"]?.stringValue ?? server.description,
                                            flowType: object["flowType"]?.stringValue ?? result.flowType, keyFingerprint: fingerprint,
                                            registeredAt: object["registeredAt"]?.stringValue ?? "")
            return (record, answer["backend"]?.stringValue ?? "?")
        })
    }

    /// The Flow Execution API gives a device no way to delete its record.
    static let oldRecordAdvice = "devtrust cannot delete it (the server offers a device no way to); remove it at the server (the user's or an administrator's device list)"
}
