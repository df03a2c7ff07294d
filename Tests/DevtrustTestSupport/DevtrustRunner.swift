import Foundation

/// Runs devtrust commands against one keystore, in a controlled environment:
/// the built binary (`DevtrustBinary`) or, in the CLI tests, the command line
/// in-process (`InProcessCLI`). Fixtures take either.
public protocol DevtrustRunner {
    var keystore: String { get }
    /// Added to (or replacing) the minimal environment below.
    var extraEnvironment: [String: String] { get set }
    func run(_ arguments: [String], stdin: [UInt8]?) throws -> ProcessResult
}

extension DevtrustRunner {
    /// A minimal environment: no inherited DEVTRUST_* or XDG settings leak into tests. It names
    /// the test's own keystore, cache and configuration (`OwnDirectories`).
    public var environment: [String: String] {
        var environment = ["PATH": "/usr/bin:/bin", "HOME": keystore + "/home", "DEVTRUST_KEYSTORE": keystore,
                           "XDG_CONFIG_HOME": keystore + "/no-config", "XDG_CACHE_HOME": keystore + "-cache"]
        environment.merge(extraEnvironment) { $1 }
        return OwnDirectories.withoutTheMachinesTPM(environment)
    }

    /// The cache directory (`XDG_CACHE_HOME`/devtrust): beside the keystore, not in it.
    public var cacheDirectory: String { keystore + "-cache/devtrust" }

    @discardableResult
    public func run(_ arguments: [String]) throws -> ProcessResult {
        try run(arguments, stdin: nil)
    }

    @discardableResult
    public func run(_ arguments: String..., stdin: String? = nil) throws -> ProcessResult {
        try run(arguments, stdin: stdin.map { Array($0.utf8) })
    }
}

/// The directories devtrust chooses by itself when no variable names them: as root the
/// machine's own (/var/lib/devtrust, /var/cache/devtrust, /etc/devtrust), else the user's
/// (~/.local/share/devtrust, ~/.cache/devtrust, ~/.config/devtrust). On an enrolled machine
/// those hold the device's real key, registrations, clock corrections and configuration:
/// every test names its own (`make test` fails when one of them changes: scripts/untouched.py).
public enum OwnDirectories {
    /// What `variables` leaves to devtrust's defaults: "keystore" without an absolute
    /// DEVTRUST_KEYSTORE (root's is /var/lib/devtrust whatever HOME is), "cache" without an
    /// absolute XDG_CACHE_HOME (root's is /var/cache/devtrust whatever HOME is),
    /// "configuration" without a DEVTRUST_CONFIG, an absolute XDG_CONFIG_HOME or a HOME of
    /// the test's own (root too reads $HOME/.config/devtrust/config.json).
    public static func unnamed(in variables: [String: String]) -> [String] {
        func absolute(_ name: String) -> Bool { variables[name]?.hasPrefix("/") == true }
        var unnamed = [String]()
        if !absolute("DEVTRUST_KEYSTORE") { unnamed.append("keystore (DEVTRUST_KEYSTORE)") }
        if !absolute("XDG_CACHE_HOME") { unnamed.append("cache (XDG_CACHE_HOME)") }
        let ownHome = absolute("HOME") && !invokingHomes.contains(variables["HOME"]!)
        if variables["DEVTRUST_CONFIG"]?.isEmpty != false && !absolute("XDG_CONFIG_HOME") && !ownHome {
            unnamed.append("configuration (XDG_CONFIG_HOME)")
        }
        return unnamed
    }

    /// A TPM that is not there, unless the test names one (a TCTI variable; an empty one, which
    /// devtrust takes for none, lets a keystore's recorded TCTI, the test's own swtpm, be used):
    /// without one devtrust would use the machine's /dev/tpmrm0 or tabrmd, and as root `init`
    /// makes a storage root key persistent there, in the TPM's own storage.
    public static let absentTPM = "device:/nonexistent/machine-tpm-is-not-for-tests"

    public static func withoutTheMachinesTPM(_ variables: [String: String]) -> [String: String] {
        guard ["DEVTRUST_TCTI", "TPM2TOOLS_TCTI", "TSS2_TCTI"].allSatisfy({ variables[$0] == nil }) else { return variables }
        return variables.merging(["DEVTRUST_TCTI": absentTPM]) { $1 }
    }

    /// The homes of whoever runs the tests: their ~/.config/devtrust is not a test's.
    static let invokingHomes: Set<String> = {
        var homes = Set<String>()
        if let home = ProcessInfo.processInfo.environment["HOME"] { homes.insert(home) }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir { homes.insert(String(cString: directory)) }
        return homes
    }()

    /// The variables naming a keystore, cache and configuration of their own below `directory`
    /// (which the caller removes), as `DevtrustRunner.environment` names them beside a keystore.
    public static func variables(in directory: String) -> [String: String] {
        ["HOME": directory + "/home", "DEVTRUST_KEYSTORE": directory + "/ks", "XDG_CONFIG_HOME": directory + "/config",
         "XDG_CACHE_HOME": directory + "/cache", "XDG_DATA_HOME": directory + "/data"]
    }
}
