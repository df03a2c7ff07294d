import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeystore
import DevtrustPosture

/// `device-data` and `token`: ES256 JWTs with a fresh jti and iat.
enum TokenCommands {
    static func runDeviceData(_ context: CommandContext) throws {
        let claims = try parseClaims(context, command: "device-data")
        let configuration = try context.configuration()
        let store = try context.deviceStore()
        let device = try store.loadKey()
        let attributes = deviceAttributes(context, configuration, claims: claims, backend: device.record.backend.rawValue)
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
        let configuration = try context.configuration()
        let store = try context.deviceStore()
        let device = try store.loadKey()
        let registration = try explicitDeviceID.map { id in device.state.registrations.first { $0.registrationId == id } }
            ?? RegistrationSelector.select(from: device.state, server: context.arguments.value("server"))
        let deviceID = explicitDeviceID ?? registration!.registrationId
        let attributes = deviceAttributes(context, configuration, claims: claims, backend: device.record.backend.rawValue)
        // In the server's time when its clock was measured to differ (ClockSkew says when that still holds).
        let clock = registration.map { context.clocks.clock(for: $0.server, base: context.environment.clock) } ?? context.environment.clock
        context.output(try DeviceTokenMinter(key: device.key, clock: clock, random: context.environment.random)
            .deviceToken(deviceId: deviceID, attributes: attributes))
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

    /// `platform`, the device's posture (and the admin's collector), the
    /// configuration's claims, then `--claim`s; a later value wins.
    static func deviceAttributes(_ context: CommandContext, _ configuration: Configuration, claims: [(String, String)],
                                 backend: String?) -> DeviceAttributes {
        deviceAttributes(configuration, claims: claims, posture: posture(context, configuration, backend: backend))
    }

    static func deviceAttributes(_ configuration: Configuration, claims: [(String, String)], posture report: PostureReport) -> DeviceAttributes {
        var attributes = DeviceAttributes(platform: configuration.platform)
        for (name, value) in report.claims { attributes.set(name, value) }
        for (name, value) in configuration.claims { attributes.set(name, value) }
        for (name, value) in claims { attributes.set(name, value) }
        return attributes
    }

    /// Collects the posture; problems (a failing admin collector) are reported, never fatal.
    static func posture(_ context: CommandContext, _ configuration: Configuration, backend: String?) -> PostureReport {
        let variables = context.environment.variables
        let input = PostureInput(effectiveUserID: context.environment.effectiveUserID, home: variables["HOME"],
                                 xdgConfigHome: variables["XDG_CONFIG_HOME"], keyProtection: backend, inventory: configuration.inventory)
        var settings = PostureSettings(collector: configuration.collector)
        settings.collectorTimeoutMilliseconds = configuration.collectorTimeoutSeconds * 1000
        settings.cacheSeconds = Int64(configuration.postureCacheSeconds)
        let cache = context.cacheDirectory.map(PostureCacheFile.init)
        let report = PostureCollector.collect(input, settings: settings, cache: cache,
                                              now: context.environment.clock.secondsSinceEpoch())
        for problem in report.problems { context.warn(problem) }
        return report
    }
}

/// Slow collectors' results, in the cache directory (`posture.json`), not the keystore.
struct PostureCacheFile: PostureCacheStore {
    static let fileName = "posture.json"
    let directory: CacheDirectory

    func read() -> [UInt8]? { directory.read(Self.fileName) }
    func write(_ bytes: [UInt8]) { directory.write(Self.fileName, bytes) }
}
