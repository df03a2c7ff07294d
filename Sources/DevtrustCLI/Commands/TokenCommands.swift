import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
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
        let claims = try DeviceAttributesForKey.addedClaims(options.claims, command: Options.spec.name)
        let configuration = try context.configuration()
        let store = try context.deviceStore()
        let deviceData = try KeyUseDeadline.bounding(context, "signing the deviceData") {
            let device = try store.loadKey()
            let attributes = DeviceAttributesForKey(configuration: configuration, addedClaims: claims)
                .attributes(context, backend: device.record.backend)
            return try DeviceTokenMinter(key: device.key, clock: context.environment.clock, random: context.environment.random)
                .deviceData(attributes: attributes)
        }
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
        let claims = try DeviceAttributesForKey.addedClaims(options.claims, command: Options.spec.name)
        let explicitDeviceID = try options.deviceID.map { id throws(UsageError) -> String in
            guard !id.isEmpty, id.count <= 256, !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw UsageError("--device-id must be 1 to 256 printable characters", command: "token")
            }
            return id
        }
        let configuration = try context.configuration()
        let store = try context.deviceStore()
        let token = try KeyUseDeadline.bounding(context, "loading the device key and signing the token") {
            try mint(context, options, store: store, configuration: configuration, claims: claims, explicitDeviceID: explicitDeviceID)
        }
        context.output(context.json ? JSONWriter.string(.object(["token": .string(token)])) : token)
    }

    /// Loads the key, picks the registration and signs: what the deadline bounds.
    private static func mint(_ context: CommandContext, _ options: Options, store: DeviceStore, configuration: Configuration,
                             claims: [(String, String)], explicitDeviceID: String?) throws -> String {
        let device = try store.loadKey()
        let selected = try RegistrationSelector.select(from: device.state, explicitDeviceID.map(RegistrationChoice.deviceID) ?? .server(options.server))
        let registration = selected.registration
        let deviceID = selected.deviceID
        let attributesForKey = DeviceAttributesForKey(configuration: configuration, addedClaims: claims)
        let attributes: DeviceAttributes
        // The steps are said only with -v: the default path does no more than mint.
        if context.verbose {
            context.detail("keystore: \(store.keystore.path)")
            context.detail("key: \(device.record.backend.rawValue) key \(device.record.fingerprint)")
            if let explicitDeviceID {
                context.detail("device id: \(explicitDeviceID), from --device-id" + (registration.map { " (registered at \($0.server))" } ?? ""))
            } else if let registration {
                context.detail("registration: \(registration.registrationId) at \(registration.server), "
                               + (options.server == nil ? "the only one" : "the one for --server \(options.server!)"))
            }
            let report = attributesForKey.posture(context, backend: device.record.backend)
            for line in attributesForKey.sources(posture: report) { context.detail(line) }
            attributes = attributesForKey.attributes(posture: report)
        } else {
            attributes = attributesForKey.attributes(context, backend: device.record.backend)
        }
        // In the server's time when its clock was measured to differ (ClockSkew says when that still holds).
        let clock = registration.map { context.clocks.clock(for: $0.server, base: context.environment.clock) } ?? context.environment.clock
        if context.verbose {
            context.detail("signing: an ES256 device token with header deviceId, a new jti and the current iat (printed on stdout)")
        }
        return try DeviceTokenMinter(key: device.key, clock: clock, random: context.environment.random)
            .deviceToken(deviceId: deviceID, attributes: attributes)
    }
}
