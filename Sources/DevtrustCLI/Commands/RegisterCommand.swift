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
        let presets = try inputs(context)
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

    /// `--inputs FILE|-` (a JSON object of strings), then `--input NAME=VALUE`, which wins.
    static func inputs(_ context: CommandContext) throws -> [String: String] {
        var values = [String: String]()
        if let source = context.arguments.value("inputs") {
            let bytes: [UInt8]
            if source == "-" {
                guard let read = context.terminal.readInput(limit: 1 << 20) else { throw UsageError("--inputs on stdin is larger than 1 MiB", command: "register") }
                bytes = read
            } else {
                do {
                    bytes = try FileReader.read(source)
                } catch {
                    throw UsageError("--inputs: \(error)", command: "register")
                }
            }
            do {
                let reader = try JSONObjectReader(try JSONParser.parse(bytes), path: "")
                for member in reader.object.members {
                    guard case let .string(value) = member.value else {
                        throw JSONFieldError(path: member.key, kind: .invalidType(expected: "a string", found: member.value.kindDescription))
                    }
                    values[member.key] = value
                }
            } catch {
                throw UsageError("--inputs \(source): \(error) (it must be a JSON object whose values are all strings)", command: "register")
            }
        }
        var exposed = [String]()
        for option in context.arguments.all("input") {
            guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                throw UsageError("--input takes NAME=VALUE, got \"\(option.prefix(40))\"", command: "register")
            }
            let name = String(option[..<equals])
            values[name] = String(option[option.index(after: equals)...])
            if looksSecret(name) { exposed.append(name) }
        }
        if !exposed.isEmpty {
            context.warn("--input \(exposed.joined(separator: ", ")): a command line is visible to every user of this machine (ps, /proc) while devtrust runs; give secrets with --inputs FILE, --inputs - (stdin) or at the prompt")
        }
        return values
    }

    /// Input names that usually carry a secret (passwords, one-time codes, PINs).
    static func looksSecret(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return ["password", "passwd", "passcode", "secret", "otp", "totp", "pin", "token"].contains { lowered.includes($0) }
            || lowered.hasSuffix("code")
    }
}
