import DevtrustSystem

/// Everything the collectors found: the attributes (with values or why not)
/// and the problems to report (a failing admin collector, say).
public struct PostureReport: Sendable {
    public let attributes: [Attribute]
    public let problems: [String]

    public init(attributes: [Attribute], problems: [String] = []) {
        self.attributes = attributes
        self.problems = problems
    }

    /// The claims to send: attributes that have a value, in order.
    public var claims: [(name: String, value: String)] {
        attributes.compactMap { attribute in attribute.value.map { (attribute.name, $0) } }
    }
}

public struct PostureSettings: Sendable {
    /// The admin's collector program and arguments, if any.
    public var collector: [String]?
    public var collectorTimeoutMilliseconds = 2000
    /// How long subprocess results are reused.
    public var cacheSeconds: Int64 = 300

    public init(collector: [String]? = nil) {
        self.collector = collector
    }
}

/// Linux device posture as flat string claims, read without root from files
/// (below `input.root`); subprocess results are cached.
public enum PostureCollector {
    public static func collect(_ input: PostureInput, settings: PostureSettings = PostureSettings(),
                               cache: (any PostureCacheStore)? = nil, now: Int64 = 0) -> PostureReport {
        var attributes = OSReleaseCollector.collect(input)
        attributes.append(DiskEncryptionCollector.collect(input))
        attributes.append(FirmwareCollector.secureBoot(input))
        attributes.append(FirmwareCollector.trustedPlatformModule(input))
        attributes.append(FirmwareCollector.keyProtection(input))
        attributes.append(LockScreenCollector.collect(input))
        if input.inventory {
            if let model = DeviceModel.detect(root: input.root) {
                attributes.append(Attribute(name: "hardwareModel", value: model, source: "DMI product name (inventory enabled in the configuration)"))
            } else {
                attributes.append(.absent("hardwareModel", "no DMI product name or host name"))
            }
        }

        var problems = [String]()
        var stored = PostureCache(cache?.read())
        var changed = false
        func cached(_ name: String, _ compute: () -> [Attribute]) -> [Attribute] {
            if let hit = stored.fresh(name, now: now, maxAge: settings.cacheSeconds) { return hit }
            let fresh = compute()
            stored.entries[name] = (now, fresh)
            changed = true
            return fresh
        }
        attributes += cached("firewall") { [FirewallCollector.collect(input)] }
        if let command = settings.collector, !command.isEmpty {
            let entry = "collector:" + command.joined(separator: " ")
            // The names it produced before: a run that fails still names them (left out), so that a
            // claim given by hand cannot fill in, while the collector fails, a name it measures.
            let before = stored.entries[entry]?.attributes ?? []
            attributes += cached(entry) {
                let result = CommandCollector.collect(command, timeoutMilliseconds: settings.collectorTimeoutMilliseconds)
                guard let problem = result.problem else { return result.attributes }
                problems.append(problem)
                let named = Set(result.attributes.map(\.name))
                return result.attributes + before.filter { !named.contains($0.name) }.map {
                    .absent($0.name, "the administrator's collector failed this time (\(problem)); it measured this claim before, so it is left out")
                }
            }
        }
        if changed, let cache { cache.write(stored.bytes) }
        return PostureReport(attributes: attributes, problems: problems)
    }
}
