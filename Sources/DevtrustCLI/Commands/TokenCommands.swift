import DevtrustAgent
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE

/// `device-data`: a deviceData JWT (ES256) with a fresh jti and iat.
enum DeviceDataCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let claims = RepeatableOption<Self>.claim
        static let spec = CommandSpec(name: "device-data", summary: "print a deviceData JWT (ES256)", options: [claims])

        var claims: [String]

        init(_ values: OptionValues<Self>) {
            claims = values[Self.claims]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let claims = try ClaimOption.parse(options.claims, command: Options.spec.name)
        if case let .agent(agent) = try context.deviceAccess(command: Options.spec.name) {
            // The agent's collectors and the claims its policy allows, as for `token`.
            if context.verbose { context.detail("the device key: the devtrust agent at \(agent.socket) (its keystore, its posture)") }
            let deviceData = try agent.deviceData(claims: claims)
            context.output(context.json ? JSONWriter.string(.object(["deviceData": .string(deviceData)])) : deviceData)
            return
        }
        let deviceTokens = try context.deviceTokens(try context.configuration())
        let deviceData = try deviceTokens.deviceData(addedClaims: claims, deadline: .command(context, doing: "signing the deviceData"))
        context.output(context.json ? JSONWriter.string(.object(["deviceData": .string(deviceData)])) : deviceData)
    }
}

/// `token`: a device token, an ES256 JWT with a fresh jti and iat and header `deviceId`.
enum TokenCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let server = ValueOption<Self>("server", "URL|NAME", .url, "use the registration with this server")
        static let deviceID = ValueOption<Self>("device-id", "ID", .text, "use this device id instead of a registration's")
        static let claims = RepeatableOption<Self>.claim
        static let spec = CommandSpec(name: "token", summary: "print a device token: an ES256 JWT with header deviceId",
                                      options: [server, deviceID, claims])

        var server: String?
        var deviceID: String?
        var claims: [String]

        init(_ values: OptionValues<Self>) {
            server = values[Self.server]
            deviceID = values[Self.deviceID]
            claims = values[Self.claims]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let claims = try ClaimOption.parse(options.claims, command: Options.spec.name)
        let explicitDeviceID = try options.deviceID.map { id throws(UsageError) -> String in
            guard !id.isEmpty, id.count <= 256, !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw UsageError("--device-id must be 1 to 256 printable characters", command: "token")
            }
            return id
        }
        if case let .agent(agent) = try context.deviceAccess(command: Options.spec.name) {
            // The agent gathers the claims and picks among the caller's registrations; this side reads no configuration.
            if context.verbose { context.detail("the device key: the devtrust agent at \(agent.socket) (its keystore, its posture, your registrations)") }
            let token = try agent.token(server: options.server, deviceID: explicitDeviceID, claims: claims)
            context.output(context.json ? JSONWriter.string(.object(["token": .string(token)])) : token)
            return
        }
        let deviceTokens = try context.deviceTokens(try context.configuration())
        let token = try deviceTokens.deviceToken(for: explicitDeviceID.map(RegistrationChoice.deviceID) ?? .server(options.server), addedClaims: claims,
                                                 deadline: .command(context, doing: "loading the device key and signing the token"),
                                                 // The steps are said only with -v: the default path does no more than mint.
                                                 steps: context.verbose ? { say($0, context, options, store: deviceTokens.store) } : nil)
        context.output(context.json ? JSONWriter.string(.object(["token": .string(token)])) : token)
    }

    /// `-v`: the keystore, the key, the registration and why, each claim's source, the signing.
    private static func say(_ step: DeviceTokenService.Step, _ context: CommandContext, _ options: Options, store: DeviceStore) {
        switch step {
        case let .registrationChosen(device, selected):
            context.detail("keystore: \(store.keystore.path)")
            context.detail("key: \(device.record.backend.rawValue) key \(device.record.fingerprint)")
            if let explicitDeviceID = options.deviceID {
                context.detail("device id: \(explicitDeviceID), from --device-id" + (selected.registration.map { " (registered at \($0.server))" } ?? ""))
            } else if let registration = selected.registration {
                context.detail("registration: \(registration.registrationId) at \(registration.server), "
                               + (options.server == nil ? "the only one" : "the one for --server \(options.server!)"))
            }
        case let .attributesGathered(claimSources):
            for line in claimSources { context.detail(line) }
        case .signing:
            context.detail("signing: an ES256 device token with header deviceId, a new jti and the current iat (printed on stdout)")
        }
    }
}
