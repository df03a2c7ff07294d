import DevtrustConfig
import DevtrustErrors
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustPosture
import DevtrustSystem

/// The attributes a device token or deviceData carries for a key: `platform`,
/// the device's posture (the key's backend among it, and the admin's
/// collector), then the claims given by hand: the configuration's claims, then
/// `--claim`s (or a client's claims, in the agent), a later one winning over an
/// earlier given one. A given claim only adds a name: it never replaces a
/// measured or reserved one (`ClaimName.givenClaimProblem`, checked where the
/// claims are read, and here against the names the collectors produced).
/// `device-data`, `token`, `register`, `login` (its device token), the native
/// host, the agent and `attributes` all take them from here (through `DeviceTokenService`).
public struct DeviceAttributesForKey: Sendable {
    let configuration: Configuration
    /// `--claim NAME=VALUE`s (through the agent too), checked (`ClaimName.givenClaimProblem`).
    let addedClaims: [(String, String)]

    public init(configuration: Configuration, addedClaims: [(String, String)] = []) {
        self.configuration = configuration
        self.addedClaims = addedClaims
    }

    public func attributes(posture report: PostureReport) throws(GivenClaimRefusal) -> DeviceAttributes {
        var attributes = DeviceAttributes(platform: configuration.platform)
        for (name, value) in report.claims { attributes.set(name, value) }
        // A collector's name, whether or not it found a value this time (an absent value is not one to fill in).
        let produced = Set(report.attributes.map(\.name))
        for (name, value) in configuration.claims {
            if produced.contains(name) { throw GivenClaimRefusal(name: name, source: "the configuration's claims (\(configuration.source ?? "built in"))", report: report) }
            attributes.set(name, value)
        }
        for (name, value) in addedClaims {
            if produced.contains(name) { throw GivenClaimRefusal(name: name, source: "--claim", report: report) }
            attributes.set(name, value)
        }
        return attributes
    }

    /// Where each claim of `attributes(posture:)` comes from, one line each
    /// (names and sources, for -v; values stay in the token).
    public func sources(posture report: PostureReport) -> [String] {
        var lines = ["claim platform: the configuration (\(configuration.platform))"]
        for attribute in report.attributes {
            lines.append("claim \(attribute.name): " + (attribute.value == nil ? "left out, " : "") + attribute.source)
        }
        for (name, _) in configuration.claims { lines.append("claim \(name): the configuration's claims") }
        for (name, _) in addedClaims { lines.append("claim \(name): --claim") }
        return lines
    }
}

/// A claim given by hand (the configuration's `claims`, `--claim`, a client of the agent) for a
/// name that a collector produced: the administrator's collector, whose names are known only once
/// it ran (devtrust's own and the reserved names are refused where the claims are read). A usage
/// error: what was asked cannot be done.
public struct GivenClaimRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    public let name: String
    /// Where the claim was given.
    public let source: String
    /// Where the collector's claim came from.
    public let producedBy: String

    init(name: String, source: String, report: PostureReport) {
        self.name = name
        self.source = source
        producedBy = report.attributes.first { $0.name == name }?.source ?? "a collector"
    }

    public var description: String { classification.message }
}

extension GivenClaimRefusal: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(.usage, summary: "the claim \(name) given in \(source) is one a collector measures (\(producedBy))",
                            hint: ErrorHint("a given claim cannot replace a measured one: leave it out, or give it another name", joinedBy: "; "))
    }
}

/// Where this machine's posture is read: below a root ("" on the machine, a fixture tree in
/// tests), as which user, and where the slow collectors' results are cached.
public struct PostureSources: Sendable {
    /// Prefix of every path the collectors read.
    let root: String
    let effectiveUserID: UInt32
    /// The user's home directory and XDG_CONFIG_HOME (the desktop's lock-screen settings).
    let home: String?
    let xdgConfigHome: String?
    /// Whose home it is, when not this process's user's (the agent reading a client's settings).
    let homeOwner: FileOwner?
    /// Where the firewall's and the admin's collector's results are kept (nil: nowhere).
    let cache: CacheDirectory?

    public init(root: String = "", effectiveUserID: UInt32, home: String?, xdgConfigHome: String?, cache: CacheDirectory?,
                homeOwner: FileOwner? = nil) {
        self.root = root
        self.homeOwner = homeOwner
        self.effectiveUserID = effectiveUserID
        self.home = home
        self.xdgConfigHome = xdgConfigHome
        self.cache = cache
    }

    /// Collects the posture for a key kept by `backend` (nil: no key), as `configuration` says
    /// (its collector, timeouts, cache time, inventory), at `now` (the cache's clock).
    public func collect(backend: KeyBackend?, configuration: Configuration, now: Int64) -> PostureReport {
        let input = PostureInput(root: root, effectiveUserID: effectiveUserID, home: home, xdgConfigHome: xdgConfigHome,
                                 keyProtection: backend?.rawValue, inventory: configuration.inventory, homeOwner: homeOwner)
        var settings = PostureSettings(collector: configuration.collector)
        settings.collectorTimeoutMilliseconds = configuration.collectorTimeoutSeconds * 1000
        settings.cacheSeconds = Int64(configuration.postureCacheSeconds)
        return PostureCollector.collect(input, settings: settings, cache: cache.map(PostureCacheFile.init), now: now)
    }
}

/// Slow collectors' results, in the cache directory (`posture.json`), not the keystore.
struct PostureCacheFile: PostureCacheStore {
    static let fileName = "posture.json"
    let directory: CacheDirectory

    func read() -> [UInt8]? { directory.read(Self.fileName) }
    func write(_ bytes: [UInt8]) { directory.write(Self.fileName, bytes) }
}
