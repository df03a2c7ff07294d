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
    /// A minimal environment: no inherited DEVTRUST_* or XDG settings leak into tests.
    public var environment: [String: String] {
        var environment = ["PATH": "/usr/bin:/bin", "HOME": keystore + "/home", "DEVTRUST_KEYSTORE": keystore,
                           "XDG_CONFIG_HOME": keystore + "/no-config", "XDG_CACHE_HOME": keystore + "-cache"]
        environment.merge(extraEnvironment) { $1 }
        return environment
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
