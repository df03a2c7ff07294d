import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustFlow
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeystore
import DevtrustSystem

/// `register`: walks a Flow Execution API flow and answers its Device
/// Registration step; records the registration only when the flow completes.
enum RegisterCommand {
    static func run(_ context: CommandContext) throws {
        let arguments = context.arguments
        guard let serverText = arguments.value("server") else {
            throw UsageError("--server URL is required (the server's base URL, e.g. https://api.asgardeo.io/t/acme)", command: "register")
        }
        let server = try ServerURL(serverText)
        let flowType = arguments.value("flow-type") ?? "REGISTRATION"
        guard !flowType.isEmpty, flowType.allSatisfy({ $0.isUppercase || $0 == "_" }) else {
            throw UsageError("--flow-type must be a flow type such as REGISTRATION, not \"\(flowType)\"", command: "register")
        }
        let presets = try ScriptedInputs.read(context, command: "register")
        let claims = try TokenCommands.parseClaims(context, command: "register")
        let configuration = try context.configuration()

        let store = try context.deviceStore()
        if try store.state().key == nil {
            context.info("this device has no key yet; creating one first")
            try InitCommand.run(context.replacingArguments(["init"]))
        }
        let device = try store.loadKey()
        // Before the first request: a key that cannot sign would fail only at
        // the device step, after the server created the account and sent an OTP.
        try device.key.checkCanSign(random: context.environment.random)
        let attributes = TokenCommands.deviceAttributes(context, configuration, claims: claims,
                                                        backend: device.record.backend.rawValue)
        let http = context.clocks.watch(CurlHTTPClient(options: httpOptions(context, configuration)))
        // deviceData in the server's time, once its answers have told it.
        let responder = DeviceRegistrationResponder(
            minter: DeviceTokenMinter(key: device.key, clock: context.clocks.clock(for: server.description, base: context.environment.clock),
                                      random: context.environment.random),
            attributes: attributes,
            deviceModel: arguments.value("device-model") ?? DeviceModel.detect())
        let interaction = TerminalFlowInteraction(
            context: context, presets: presets,
            interactive: !arguments.has("non-interactive") && context.terminal.inputIsTerminal,
            openBrowser: arguments.has("open"))
        context.info("registering this device with \(server) (flow \(flowType))")
        let result = try RegistrationDriver(client: FlowClient(server: server, http: http), responder: responder, interaction: interaction)
            .run(flowType: flowType, applicationId: arguments.value("application-id"))

        let record = RegistrationRecord(
            registrationId: result.registrationId, server: server.description, flowType: result.flowType,
            keyFingerprint: device.record.fingerprint,
            registeredAt: Timestamp.format(secondsSinceEpoch: context.environment.clock.secondsSinceEpoch()))
        try store.recordRegistration(record)
        context.info("registered: this device is \(record.registrationId) at \(record.server) (\(device.record.backend.rawValue) key \(record.keyFingerprint)); `devtrust token` now carries that id")
        if context.json {
            context.output(JSONWriter.string(.object([
                "registrationId": .string(record.registrationId), "server": .string(record.server),
                "flowType": .string(record.flowType), "keyFingerprint": .string(record.keyFingerprint),
                "backend": .string(device.record.backend.rawValue), "registeredAt": .string(record.registeredAt),
            ])))
        }
    }

    static func httpOptions(_ context: CommandContext, _ configuration: Configuration) -> HTTPOptions {
        let caFile = context.arguments.value("ca-file") ?? context.environment.variables["DEVTRUST_CA_FILE"]
        var options = HTTPOptions(caFile: caFile?.isEmpty == false ? caFile : nil, userAgent: "devtrust/\(CommandSpecs.version)")
        options.connectTimeoutMilliseconds = configuration.http.connectTimeoutSeconds * 1000
        options.totalTimeoutMilliseconds = configuration.http.requestTimeoutSeconds * 1000
        options.debug = context.environment.variables["DEVTRUST_HTTP_DEBUG"].map { !$0.isEmpty && $0 != "0" } ?? false
        // curl's own precedence: no_proxy, then NO_PROXY. The transport adds loopback to it.
        options.noProxy = context.environment.variables["no_proxy"] ?? context.environment.variables["NO_PROXY"]
        return options
    }

}
