import DevtrustEncoding
import Foundation

/// A real OpenID provider (Debian's glewlwyd) for one test suite, started by
/// Tests/Peers/glewlwyd_peer.py on a free loopback port, killed when released.
public final class GlewlwydPeer: @unchecked Sendable {
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/glewlwyd") }
    public static var shouldRun: Bool { (isInstalled && ExternalTool.python.isInstalled) || ExternalTool.isCI }

    public let directory = TemporaryDirectory("glewlwyd")
    public let base: String
    public let discovery: String
    /// Device codes that live 8 s (interval 2 s): for a code that expires unapproved.
    public let shortDiscovery: String
    /// Device codes that live 120 s (interval 2 s): for a code approved after a few polls.
    public let quickDiscovery: String
    /// Plugin oidc-dpop: DPoP with mandatory nonces, and CIBA in poll mode for the public client.
    public let dpopDiscovery: String
    public let clientID: String
    public let document: JSONObject

    public init() throws {
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Peers/glewlwyd_peer.py"), "start", "--dir", directory.path])
        guard result.status == 0, case let .object(info) = try JSONParser.parse(result.stdout) else {
            throw SwtpmError("glewlwyd did not start: \(result.stderr)")
        }
        base = info["base"]!.stringValue!
        discovery = info["discovery"]!.stringValue!
        shortDiscovery = info["shortDiscovery"]!.stringValue!
        quickDiscovery = info["quickDiscovery"]!.stringValue!
        dpopDiscovery = info["dpopDiscovery"]!.stringValue!
        clientID = info["clientId"]!.stringValue!
        document = info["document"]!.objectValue!
    }

    deinit {
        _ = try? ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Peers/glewlwyd_peer.py"), "stop", "--dir", directory.path])
    }

    /// `login --device-code --json` at this provider, approved as the demo user would: how it ended.
    public func signInWithDeviceCode(_ cli: DevtrustBinary, scope: String = "openid offline_access") throws -> (status: Int32, lines: [String], stderr: String) {
        let login = try RunningCommand(cli, ["login", "--device-code", "--discovery", discovery, "--client-id", clientID, "--scope", scope, "--json"])
        guard let started = login.nextLine().flatMap({ try? JSONParser.parse($0).objectValue }), let userCode = started["user_code"]?.stringValue else {
            let (status, lines, stderr) = login.finish()
            throw SwtpmError("login --device-code showed no user code: \(status) \(lines) \(stderr)")
        }
        let approval = try approve(userCode)
        guard approval.status == 0 else { throw SwtpmError("approving \(userCode) failed: \(approval)") }
        return login.finish()
    }

    /// RFC 7662 introspection of a token by the resource-server client: token_type, cnf.jkt, active.
    public func introspect(_ token: String, plugin: String = "oidc-dpop") throws -> JSONObject {
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Peers/glewlwyd_peer.py"), "introspect", "--dir", directory.path,
                                                                          "--plugin", plugin, token])
        guard result.status == 0, case let .object(answer) = try JSONParser.parse(result.stdout) else {
            throw SwtpmError("introspection failed: \(result.stderr)")
        }
        return answer
    }

    /// Approves a user code as the demo user would in a browser.
    @discardableResult
    public func approve(_ userCode: String, plugin: String = "oidc") throws -> ProcessResult {
        try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Peers/glewlwyd_peer.py"), "approve", "--dir", directory.path,
                                                             "--plugin", plugin, userCode])
    }
}

extension GlewlwydPeer {
    /// Approves (or denies) the demo user's pending CIBA requests in plugin oidc-dpop, as the user
    /// would on their phone; only the one with `binding` when given. Waits up to `wait` seconds for one.
    @discardableResult
    public func approveCIBA(binding: String? = nil, deny: Bool = false, wait: Double = 15) throws -> ProcessResult {
        var arguments = [Repository.path("Tests/Peers/glewlwyd_peer.py"), "approve-ciba", "--dir", directory.path, "--plugin", "oidc-dpop",
                         "--wait", "\(wait)"]
        if let binding { arguments += ["--binding", binding] }
        if deny { arguments.append("--deny") }
        return try ProcessRunner.run(ExternalTool.python.rawValue, arguments)
    }
}

/// A devtrust process whose stdout is read line by line while it runs.
public final class RunningCommand: @unchecked Sendable {
    private let process = Process()
    private let output = Pipe()
    private let errors: TemporaryDirectory
    private var buffer = [UInt8]()

    public init(_ cli: DevtrustBinary, _ arguments: [String]) throws {
        errors = TemporaryDirectory("stderr")
        process.executableURL = URL(fileURLWithPath: cli.path)
        process.arguments = arguments
        process.environment = cli.environment
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: errors.file("err"), contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors.file("err")))
        try process.run()
    }

    /// The next line of stdout, or nil at the end.
    public func nextLine() -> String? {
        let handle = output.fileHandleForReading
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self) }
            buffer += chunk
        }
    }

    /// Waits for the end; returns the exit status, the rest of stdout as lines, and stderr.
    public func finish() -> (status: Int32, lines: [String], stderr: String) {
        var lines = [String]()
        while let line = nextLine() { lines.append(line) }
        process.waitUntilExit()
        return (process.terminationStatus, lines, String(decoding: errors.read("err") ?? [], as: UTF8.self))
    }
}
