import DevtrustConfig
import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustPosture

/// The attributes a device token or deviceData carries for a key: `platform`,
/// the device's posture (the key's backend among it, and the admin's
/// collector), the configuration's claims, then `--claim`s; a later value wins.
/// `device-data`, `token`, `register`, `login` (its device token) and
/// `attributes` all take them from here.
struct DeviceAttributesForKey {
    let configuration: Configuration
    /// `--claim NAME=VALUE`s, checked (`addedClaims(_:command:)`).
    var addedClaims: [(String, String)] = []

    /// `--claim NAME=VALUE` options, checked before anything is read from disk.
    static func addedClaims(_ options: [String], command: String) throws(UsageError) -> [(String, String)] {
        var claims = [(String, String)]()
        for option in options {
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

    /// The attributes for a key kept by `backend` (nil: no key).
    func attributes(_ context: CommandContext, backend: KeyBackend?) -> DeviceAttributes {
        attributes(posture: posture(context, backend: backend))
    }

    func attributes(posture report: PostureReport) -> DeviceAttributes {
        var attributes = DeviceAttributes(platform: configuration.platform)
        for (name, value) in report.claims { attributes.set(name, value) }
        for (name, value) in configuration.claims { attributes.set(name, value) }
        for (name, value) in addedClaims { attributes.set(name, value) }
        return attributes
    }

    /// Where each claim of `attributes(posture:)` comes from, one line each
    /// (names and sources, for -v; values stay in the token).
    func sources(posture report: PostureReport) -> [String] {
        var lines = ["claim platform: the configuration (\(configuration.platform))"]
        for attribute in report.attributes {
            lines.append("claim \(attribute.name): " + (attribute.value == nil ? "left out, " : "") + attribute.source)
        }
        for (name, _) in configuration.claims { lines.append("claim \(name): the configuration's claims") }
        for (name, _) in addedClaims { lines.append("claim \(name): --claim") }
        return lines
    }

    /// Collects the posture; problems (a failing admin collector) are reported, never fatal.
    func posture(_ context: CommandContext, backend: KeyBackend?) -> PostureReport {
        let variables = context.environment.variables
        let input = PostureInput(effectiveUserID: context.environment.effectiveUserID, home: variables["HOME"],
                                 xdgConfigHome: variables["XDG_CONFIG_HOME"], keyProtection: backend?.rawValue, inventory: configuration.inventory)
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

extension RepeatableOption {
    /// `--claim NAME=VALUE`, read with `DeviceAttributesForKey.addedClaims(_:command:)`.
    static var claim: Self { Self("claim", "NAME=VALUE", .text, "add a string claim (repeatable)") }
}

/// Slow collectors' results, in the cache directory (`posture.json`), not the keystore.
struct PostureCacheFile: PostureCacheStore {
    static let fileName = "posture.json"
    let directory: CacheDirectory

    func read() -> [UInt8]? { directory.read(Self.fileName) }
    func write(_ bytes: [UInt8]) { directory.write(Self.fileName, bytes) }
}
