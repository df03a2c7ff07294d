import Foundation

/// The `devtrust` executable that `swift build` put next to the test bundle
/// (or `DEVTRUST_BIN`), run with a controlled environment.
public struct DevtrustBinary: Sendable {
    public let path: String
    public let keystore: String
    public var extraEnvironment: [String: String] = [:]

    public static var defaultPath: String {
        if let explicit = ProcessInfo.processInfo.environment["DEVTRUST_BIN"] { return explicit }
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = bundle.deletingLastPathComponent()
        // The test runner is `.build/<config>/devtrustPackageTests.xctest`; the binary sits beside it.
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("devtrust").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/devtrust").path
    }

    public init(keystore: String, path: String = DevtrustBinary.defaultPath) {
        self.path = path
        self.keystore = keystore
    }

    /// A minimal environment: no inherited DEVTRUST_* or XDG settings leak into tests.
    public var environment: [String: String] {
        var environment = ["PATH": "/usr/bin:/bin", "HOME": keystore + "/home", "DEVTRUST_KEYSTORE": keystore,
                           "XDG_CONFIG_HOME": keystore + "/no-config"]
        environment.merge(extraEnvironment) { $1 }
        return environment
    }

    @discardableResult
    public func run(_ arguments: [String], stdin: [UInt8]? = nil) throws -> ProcessResult {
        try ProcessRunner.run(path, arguments, environment: environment, stdin: stdin)
    }

    @discardableResult
    public func run(_ arguments: String..., stdin: String? = nil) throws -> ProcessResult {
        try run(arguments, stdin: stdin.map { Array($0.utf8) })
    }
}
