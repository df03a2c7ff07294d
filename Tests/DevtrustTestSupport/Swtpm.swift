import Foundation

/// A private software TPM (Debian's swtpm) for one test: its own state
/// directory, free loopback ports (server port P, control port P+1, as the
/// swtpm TCTI expects), stopped by PID when released.
public final class Swtpm: @unchecked Sendable {
    public static let binary = "/usr/bin/swtpm"
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: binary) }
    /// Run TPM tests when swtpm is here, or always on CI (where its absence must fail).
    public static var shouldRun: Bool { isInstalled || ExternalTool.isCI }

    public let port: Int
    public let stateDirectory: TemporaryDirectory
    private var process: Process?

    /// tpm2_createprimary's attributes for devtrust's standard storage root key
    /// (with `-G ecc256:aes128cfb`): tpm2-tools' default leaves out noda.
    public static let storageRootKeyAttributes = "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt"

    /// The TCTI configuration for devtrust, tpm2-tools and tpm2-openssl.
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// Starts a fresh TPM; `state` reuses another instance's state directory (a "reboot").
    public init(state: TemporaryDirectory? = nil) throws {
        guard Self.isInstalled else { throw SwtpmError("swtpm is not installed (apt-get install swtpm swtpm-tools)") }
        stateDirectory = state ?? TemporaryDirectory("swtpm-state")
        var lastError: Error = SwtpmError("no free port pair")
        // swtpm binds the ports itself, after they were found free: below the kernel's
        // ephemeral range no bind(port 0) and no outgoing connection takes them meanwhile,
        // and start() retries when another swtpm took them first.
        let ephemeralStart = Self.ephemeralPortRangeStart()
        for _ in 0..<40 {
            let candidate = Int.random(in: 20_000...(ephemeralStart - 2)) & ~1
            guard Self.isFree(candidate), Self.isFree(candidate + 1) else { continue }
            do {
                process = try Self.start(port: candidate, state: stateDirectory.path)
                port = candidate
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    deinit { stop() }

    /// Shuts swtpm down through its control channel (children of the test
    /// runner inherit a mask that blocks SIGTERM), or kills it if that fails.
    public func stop() {
        guard let process, process.isRunning else { return }
        _ = try? ProcessRunner.run("/usr/bin/swtpm_ioctl", ["--tcp", "127.0.0.1:\(port + 1)", "-s"])
        let deadline = Date().addingTimeInterval(2)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        kill()
    }

    /// Sends swtpm a signal: SIGSTOP for a TPM that stops answering, SIGCONT to resume it.
    public func signal(_ number: Int32) {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, number)
    }

    /// Kills swtpm and starts it again on the same ports with the same state (a TPM that restarts:
    /// its transient objects are gone, its persistent ones and its seeds are not).
    public func restart() throws {
        kill()
        var lastError: Error = SwtpmError("swtpm did not restart")
        // The ports are free once the killed swtpm is gone; another program may take one meanwhile.
        for _ in 0..<20 {
            do {
                process = try Self.start(port: port, state: stateDirectory.path)
                return
            } catch {
                lastError = error
                usleep(100_000)
            }
        }
        throw lastError
    }

    /// Kills swtpm at once (a TPM that goes away).
    public func kill() {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Runs a tpm2-tools command against this TPM.
    @discardableResult
    public func tool(_ name: String, _ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run("/usr/bin/" + name, arguments, environment: ["PATH": "/usr/bin:/bin", "TPM2TOOLS_TCTI": tcti, "TSS2_LOG": "all+NONE"])
    }

    /// Sends a raw TPM command (tpm2_send) and returns the TPM's response, whatever its response
    /// code: for what tpm2-tools has no tool for (a hash sequence left loaded, and flushing it:
    /// tpm2_flushcontext reads an object's public area first, which a sequence has none of).
    public func send(_ command: [UInt8]) throws -> [UInt8] {
        let scratch = TemporaryDirectory("tpm2-send")
        let sent = try ProcessRunner.run("/usr/bin/tpm2_send", ["-o", scratch.file("response")],
                                         environment: ["PATH": "/usr/bin:/bin", "TPM2TOOLS_TCTI": tcti, "TSS2_LOG": "all+NONE"], stdin: command)
        guard sent.status == 0, let response = scratch.read("response"), response.count >= 10 else {
            throw SwtpmError("tpm2_send: \(sent)")
        }
        return response
    }

    /// Handles of transient objects in the TPM: must be empty after every devtrust command.
    public func transientHandles() throws -> [String] { try handles("handles-transient") }

    /// Sessions loaded in the TPM: must be empty after every devtrust command.
    public func loadedSessions() throws -> [String] { try handles("handles-loaded-session") }

    public func persistentHandles() throws -> [String] { try handles("handles-persistent") }

    /// The handles tpm2_getcap lists for `capability`.
    private func handles(_ capability: String) throws -> [String] {
        let listed = try tool("tpm2_getcap", [capability])
        // An empty list must mean an empty TPM, not a tool that could not ask.
        guard listed.status == 0 else { throw SwtpmError("tpm2_getcap \(capability) failed: \(listed)") }
        return listed.stdout.split(separator: "\n").map { String($0.drop(while: { $0 == "-" || $0 == " " })) }
    }

    private static func start(port: Int, state: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["socket", "--tpm2", "--server", "type=tcp,bindaddr=127.0.0.1,port=\(port)",
                             "--ctrl", "type=tcp,bindaddr=127.0.0.1,port=\(port + 1)", "--tpmstate", "dir=\(state)",
                             "--flags", "not-need-init,startup-clear"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Generous: on a loaded machine swtpm can take seconds to start.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if !process.isRunning { throw SwtpmError("swtpm exited at start (port \(port) taken?)") }
            // Its own listeners, not another program's that took a port first.
            if listens(process.processIdentifier, on: port) && listens(process.processIdentifier, on: port + 1) { return process }
            usleep(10_000)
        }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        throw SwtpmError("swtpm did not start listening on port \(port)")
    }

    /// Whether process `pid` holds the socket listening on 127.0.0.1:`port` (/proc/net/tcp
    /// names the listening socket's inode; /proc/PID/fd the sockets the process holds).
    static func listens(_ pid: Int32, on port: Int) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return false }
        let local = String(format: "0100007F:%04X", port)
        let listening = Set(table.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[1] == local, fields[3] == "0A" else { return nil }
            return "socket:[\(fields[9])]"
        })
        guard !listening.isEmpty, let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
        return descriptors.contains { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)")).map(listening.contains) ?? false
        }
    }

    /// The first port the kernel hands out for bind(port 0) and outgoing connections.
    static func ephemeralPortRangeStart() -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) }.map { max($0, 22_000) } ?? 32_768
    }

    static func isFree(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

public struct SwtpmError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
