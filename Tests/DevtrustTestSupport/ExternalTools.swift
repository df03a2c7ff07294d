import Foundation

/// Independent verifiers the tests cross-check devtrust against. When CI=true
/// a missing tool is a failure, not a skip: tests gate on `available(...)`.
public enum ExternalTool: String, Sendable {
    case openssl = "/usr/bin/openssl"
    /// Debian's python3 with python3-cryptography, and the independent JWS
    /// verifiers PyJWT, jwcrypto and json5 (the pyenv `python3` on PATH lacks them).
    case python = "/usr/bin/python3"
    case jose = "/usr/bin/jose"
    /// For the small C libraries some tests preload (Tests/Interop/*.c).
    case cc = "/usr/bin/gcc"
    case valgrind = "/usr/bin/valgrind"
    /// Debian's chromium, run headless as the browser of `login --browser`.
    case chromium = "/usr/bin/chromium"
    /// Debian's Firefox ESR, run headless with devtrust's extension.
    case firefox = "/usr/bin/firefox-esr"
    /// The shells whose completion scripts `devtrust completion` writes.
    case bash = "/bin/bash"
    case zsh = "/usr/bin/zsh"
    case fish = "/usr/bin/fish"
    /// zbar's decoder, which reads the QR codes devtrust draws (taken off a terminal's screen).
    case zbarimg = "/usr/bin/zbarimg"
    /// Which system calls a command makes (what it asks of the terminal).
    case strace = "/usr/bin/strace"
    /// inotify-tools: which files a command opens (a FIFO or a device it must not).
    case inotifywait = "/usr/bin/inotifywait"

    public static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    public var isInstalled: Bool {
        guard FileManager.default.isExecutableFile(atPath: rawValue) else { return false }
        if self == .python {
            return (try? ProcessRunner.run(rawValue, ["-c", "import cryptography, json5, jwcrypto, jwt"]).status) == 0
        }
        return true
    }

    /// Run the test when the tool is here, or always on CI (where its absence must fail).
    public var shouldRun: Bool { isInstalled || Self.isCI }

    @discardableResult
    public func run(_ arguments: [String], stdin: [UInt8]? = nil) throws -> ProcessResult {
        try ProcessRunner.run(rawValue, arguments, environment: ["PATH": "/usr/bin:/bin"], stdin: stdin)
    }
}

/// Paths inside the repository, for fixtures and scripts.
public enum Repository {
    public static func root(file: StaticString = #filePath) -> String {
        var url = URL(fileURLWithPath: "\(file)")
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
        }
        fatalError("no Package.swift above \(file)")
    }

    public static func path(_ relative: String) -> String { root() + "/" + relative }
}
