import Foundation

/// The `devtrust` executable that `swift build` put next to the test bundle
/// (or `DEVTRUST_BIN`), run with a controlled environment.
public struct DevtrustBinary: DevtrustRunner, Sendable {
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

    /// The builds to run a test against when its outcome depends on what the
    /// compiler and linker did (which copies of a key are left in memory):
    /// `DEVTRUST_BIN` alone when it is set; else this build and the release
    /// build (`make build`, what users run), when that is newer than every
    /// source file. On CI the release build is always listed: `make test`
    /// makes it, and a missing or stale one fails the test instead of skipping it.
    public static let builds: [String] = {
        if ProcessInfo.processInfo.environment["DEVTRUST_BIN"] != nil { return [defaultPath] }
        let release = Repository.path(".build/release/devtrust")
        if ExternalTool.isCI || isNewerThanTheSources(release) { return [defaultPath, release] }
        // Said, not silent: the release build can keep what the debug build does not (a compiler's copies).
        print("note: \(release) is missing or older than the sources: these tests ran against the debug build only (`make build`, or `make test`, builds it)")
        return [defaultPath]
    }()

    /// False for a listed release build that is missing or older than the sources.
    public static func isCurrent(_ path: String) -> Bool {
        path == defaultPath || isNewerThanTheSources(path)
    }

    /// Whether the file was modified after everything under Sources/, Package.swift and the Makefile.
    public static func isNewerThanTheSources(_ path: String) -> Bool {
        func modified(_ path: String) -> Date? {
            (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
        }
        guard let built = modified(path) else { return false }
        let sources = Repository.path("Sources")
        let files = (FileManager.default.enumerator(atPath: sources)?.allObjects as? [String] ?? []).map { sources + "/" + $0 }
        // The Makefile holds the release build's flags (static OpenSSL, -z now, link order).
        return (files + [Repository.path("Package.swift"), Repository.path("Makefile")]).allSatisfy { (modified($0) ?? .distantPast) < built }
    }

    /// A copy of a file (the binary, a script) that another user can run: in `directory`, mode
    /// 0755. The checkout may sit where other users cannot enter (a 0700 home, a mktemp folder).
    /// Written by install(1), in a process of its own: a file this process held open for writing
    /// would be inherited by a process another test starts meanwhile, and running the copy would
    /// then fail with ETXTBSY ("Text file busy") for as long as that process lives.
    public static func copyForOtherUsers(_ source: String, into directory: String) -> String {
        let target = directory + "/" + URL(fileURLWithPath: source).lastPathComponent
        if (try? ProcessRunner.run("/usr/bin/install", ["-m", "0755", source, target]))?.status != 0 {
            // Without install(1): a copy written here, which running it then finds as it is.
            _ = FileManager.default.createFile(atPath: target, contents: FileManager.default.contents(atPath: source))
            chmod(target, 0o755)
        }
        return target
    }

    public init(keystore: String, path: String = DevtrustBinary.defaultPath) {
        self.path = path
        self.keystore = keystore
    }

    public func run(_ arguments: [String], stdin: [UInt8]?) throws -> ProcessResult {
        let environment = environment
        let unnamed = OwnDirectories.unnamed(in: environment)
        guard unnamed.isEmpty else {
            throw FixtureError("devtrust would use the machine's (or this user's) own \(unnamed.joined(separator: ", ")): name the test's own")
        }
        return try ProcessRunner.run(path, arguments, environment: environment, stdin: stdin)
    }
}
