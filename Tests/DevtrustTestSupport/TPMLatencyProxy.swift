import Foundation

/// scripts/tpm_latency_proxy.py in front of a test's swtpm, as a process of its own: each TPM
/// command held for a chip's time (the script's table, scaled, with some commands' times given,
/// which the test may change as it goes: `delays`), and each command's name written to a log as it
/// arrives, so that a test sees which commands a running program sends, and whether one is being
/// held now.
public final class TPMLatencyProxy: @unchecked Sendable {
    private let process: BackgroundProcess
    private let scratch = TemporaryDirectory("tpm-latency-proxy")
    /// The TCTI that reaches swtpm through the proxy.
    public let tcti: String

    /// - Parameters:
    ///   - scale: the table's times multiplied (0: none held but those of `delays`).
    ///   - delays: milliseconds for some commands ("Sign": 1000), whatever the scale.
    public init(_ tpm: Swtpm, scale: Double = 0, delays: [String: Int] = [:]) throws {
        _ = FileManager.default.createFile(atPath: scratch.file("commands"), contents: nil)
        let arguments = [Repository.path("scripts/tpm_latency_proxy.py"), String(tpm.port), "--scale", String(scale), "--log", scratch.file("commands"),
                         "--delays-file", scratch.file("delays.json")]
        Self.write(delays, into: scratch)
        process = try BackgroundProcess(ExternalTool.python.rawValue, arguments, environment: ["PATH": "/usr/bin:/bin"])
        guard process.waitFor({ stdout, _ in stdout.hasSuffix("\n") }), let line = process.stdout.split(separator: "\n").first,
              line.hasPrefix("swtpm:") else {
            throw FixtureError("the TPM latency proxy did not start: \(process.stderr)")
        }
        tcti = String(line)
        self.delays = delays
    }

    /// Milliseconds for some commands, whatever the scale: from the next command on.
    public var delays: [String: Int] = [:] {
        didSet { Self.write(delays, into: scratch) }
    }

    private static func write(_ delays: [String: Int], into scratch: TemporaryDirectory) {
        let object = delays.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ")
        scratch.write("delays.json.new", "{\(object)}")
        rename(scratch.file("delays.json.new"), scratch.file("delays.json"))
    }

    /// The names of the commands the proxy received so far, in order (a command is listed as soon
    /// as it arrives, before the time it is held).
    public var commands: [String] {
        String(decoding: scratch.read("commands") ?? [], as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Waits until the proxy has received `count` commands in all; whether it did.
    @discardableResult
    public func waitForCommands(_ count: Int, seconds: Double = 60) -> Bool {
        waitFor(seconds: seconds) { $0.count >= count }
    }

    /// Waits until the commands the proxy received so far meet `condition`; whether they did.
    @discardableResult
    public func waitFor(seconds: Double = 60, _ condition: ([String]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(commands) { return true }
            usleep(10_000)
        }
        return condition(commands)
    }
}
