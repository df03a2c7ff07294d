import DevtrustSystem
import Glibc

/// Finds and reads the configuration file as the CLI contract orders it:
/// `--config FILE`, `DEVTRUST_CONFIG`, `$XDG_CONFIG_HOME/devtrust/config.json`
/// (`~/.config/...`), then `/etc/devtrust/config.json`.
public struct ConfigurationLoader: Sendable {
    public var explicitPath: String?
    public var environment: [String: String]
    /// Prefixed to the default locations, so tests can use a fixture tree.
    public var root: String

    public init(explicitPath: String?, environment: [String: String], root: String = "") {
        self.explicitPath = explicitPath
        self.environment = environment
        self.root = root
    }

    /// The file that applies and whether it must exist.
    public func location() -> (path: String, required: Bool)? {
        if let explicitPath, !explicitPath.isEmpty { return (explicitPath, true) }
        if let fromEnvironment = environment["DEVTRUST_CONFIG"], !fromEnvironment.isEmpty { return (fromEnvironment, true) }
        var candidates = [String]()
        if let configHome = environment["XDG_CONFIG_HOME"], configHome.hasPrefix("/") {
            candidates.append(configHome + "/devtrust/config.json")
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            candidates.append(home + "/.config/devtrust/config.json")
        }
        candidates.append(root + "/etc/devtrust/config.json")
        for candidate in candidates where FileReader.exists(candidate) {
            return (candidate, false)
        }
        return nil
    }

    /// The configuration in force: the file's, or the built-in defaults when there is none.
    public func load() throws(ConfigError) -> Configuration {
        guard let (path, _) = location() else { return Configuration() }
        let read: (bytes: [UInt8], trustProblem: String?)
        do {
            read = try FileReader.readTrusted(path)
        } catch {
            throw ConfigError(file: path, problem: error.isMissing ? .notFound : .unreadable(error.reason))
        }
        // The configuration names programs devtrust runs and servers it sends credentials to.
        if let problem = read.trustProblem { throw ConfigError(file: path, problem: .untrusted(problem)) }
        return try Configuration.parse(read.bytes, file: path)
    }
}
