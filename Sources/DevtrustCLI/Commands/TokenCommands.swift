import DevtrustConfig
import DevtrustDevice
import DevtrustJOSE

/// `device-data` and `token`: ES256 JWTs with a fresh jti and iat.
enum TokenCommands {
    static func runDeviceData(_ context: CommandContext) throws {
        let claims = try parseClaims(context, command: "device-data")
        let attributes = try deviceAttributes(try context.configuration(), claims: claims)
        let device = try context.deviceStore().loadKey()
        context.output(try minter(context, device).deviceData(attributes: attributes))
    }

    static func runToken(_ context: CommandContext) throws {
        let claims = try parseClaims(context, command: "token")
        let explicitDeviceID = try context.arguments.value("device-id").map { id throws(UsageError) -> String in
            guard !id.isEmpty, id.count <= 256, !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw UsageError("--device-id must be 1 to 256 printable characters", command: "token")
            }
            return id
        }
        let attributes = try deviceAttributes(try context.configuration(), claims: claims)
        let device = try context.deviceStore().loadKey()
        let deviceID = try explicitDeviceID
            ?? RegistrationSelector.select(from: device.state, server: context.arguments.value("server")).registrationId
        context.output(try minter(context, device).deviceToken(deviceId: deviceID, attributes: attributes))
    }

    private static func minter(_ context: CommandContext, _ device: LoadedDevice) -> DeviceTokenMinter {
        DeviceTokenMinter(key: device.key, clock: context.environment.clock, random: context.environment.random)
    }

    /// `--claim NAME=VALUE` options, checked before anything is read from disk.
    static func parseClaims(_ context: CommandContext, command: String) throws(UsageError) -> [(String, String)] {
        var claims = [(String, String)]()
        for option in context.arguments.all("claim") {
            guard let equals = option.firstIndex(of: "=") else {
                throw UsageError("--claim takes NAME=VALUE, got \"\(option)\"", command: command)
            }
            let name = String(option[..<equals])
            if let problem = ClaimName.problem(with: name) {
                throw UsageError("--claim \(name): \(problem)", command: command)
            }
            claims.append((name, String(option[option.index(after: equals)...])))
        }
        return claims
    }

    /// `platform`, then the configuration's claims, then `--claim`s; a later value wins.
    static func deviceAttributes(_ configuration: Configuration, claims: [(String, String)]) throws -> DeviceAttributes {
        var attributes = DeviceAttributes(platform: configuration.platform)
        for (name, value) in configuration.claims { attributes.set(name, value) }
        for (name, value) in claims { attributes.set(name, value) }
        return attributes
    }
}
