import Foundation

/// A real Unix user made for one test (useradd) and removed when released (userdel),
/// so that what another user can see and do is the kernel's decision: /proc, socket
/// owners, file modes. Needs root; `canMake` says whether this run can.
public final class LocalUser: @unchecked Sendable {
    public let name: String
    public let uid: UInt32
    public let gid: UInt32

    /// useradd and userdel lock /etc/passwd: tests running in parallel take turns.
    private static let accounts = NSLock()

    public static var canMake: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser")
    }

    /// A system user named `dt-LABEL-` and six random hex digits, with no home and no login shell; with `uid`,
    /// that uid (one a removed user had).
    public init(_ label: String, uid wanted: UInt32? = nil) throws {
        let suffix = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(6))
        name = "dt-\(label.prefix(12))-\(suffix)"
        Self.accounts.lock()
        defer { Self.accounts.unlock() }
        let made = try ProcessRunner.run("/usr/sbin/useradd", ["--system", "--no-create-home", "--home-dir", "/nonexistent",
                                                               "--shell", "/usr/sbin/nologin", "--user-group"]
                                                              + (wanted.map { ["--uid", "\($0)"] } ?? []) + [name])
        guard made.status == 0 else { throw FixtureError("useradd \(name) failed: \(made)") }
        let id = try ProcessRunner.run("/usr/bin/id", ["-u", name])
        let group = try ProcessRunner.run("/usr/bin/id", ["-g", name])
        guard let uid = UInt32(id.output), let gid = UInt32(group.output) else { throw FixtureError("id \(name): \(id) \(group)") }
        self.uid = uid
        self.gid = gid
    }

    /// A user whose uid useradd never gives on its own (above UID_MAX, 60000, and below nobody's):
    /// once the user is removed, the uid stays free for the test to give again, whatever users other
    /// test processes make meanwhile (a system uid freed by userdel was taken by one).
    public static func withReusableUID(_ label: String) throws -> LocalUser {
        var refused = [String]()
        for _ in 0..<8 {
            let candidate = UInt32.random(in: 61_000..<65_000)
            guard getpwuid(candidate) == nil else { continue }
            do {
                return try LocalUser(label, uid: candidate)
            } catch {
                refused.append("\(error)")  // another test process took it meanwhile
            }
        }
        throw FixtureError("no free uid in 61000..<65000 for \(label): \(refused)")
    }

    deinit {
        remove()
    }

    /// Removes the account now (userdel), as an administrator does when a user leaves; its uid is free
    /// for another. Once removed, nothing more is removed.
    public func remove() {
        Self.accounts.lock()
        defer { Self.accounts.unlock() }
        guard !removed else { return }
        removed = true
        // Whatever of theirs still runs ends first (userdel refuses a user with processes).
        endProcesses()
        _ = try? ProcessRunner.run("/usr/sbin/userdel", [name])
    }

    private var removed = false

    /// Kills every process of this user (a server of theirs that a test left running: Foundation
    /// learns that `runuser` ended only once its children have too).
    public func endProcesses() {
        _ = try? ProcessRunner.run("/usr/bin/pkill", ["-KILL", "-u", name])
    }

    /// The command line that runs `executable` as this user with exactly `environment`
    /// (runuser, then env -i: nothing of the test runner's environment).
    public func command(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) -> (String, [String]) {
        let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return ("/usr/sbin/runuser", ["-u", name, "--", "/usr/bin/env", "-i"] + variables + [executable] + arguments)
    }

    /// Runs `executable` as this user and waits for it.
    public func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: [UInt8]? = nil) throws -> ProcessResult {
        let (runner, words) = command(executable, arguments, environment: environment)
        return try ProcessRunner.run(runner, words, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"], stdin: stdin)
    }

    /// Starts `executable` as this user and leaves it running.
    public func start(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> BackgroundProcess {
        let (runner, words) = command(executable, arguments, environment: environment)
        return try BackgroundProcess(runner, words, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
    }

    /// Makes `path` this user's home in the user database (usermod), as an administrator does: where
    /// the system agent looks for their desktop's settings.
    public func setHome(_ path: String) throws {
        Self.accounts.lock()
        defer { Self.accounts.unlock() }
        let result = try ProcessRunner.run("/usr/sbin/usermod", ["--home", path, name])
        guard result.status == 0 else { throw FixtureError("usermod --home \(path) \(name): \(result)") }
    }

    /// Gives `path` (and what is below it) to this user.
    public func own(_ path: String) throws {
        let result = try ProcessRunner.run("/bin/chown", ["-R", "\(uid):\(gid)", path])
        guard result.status == 0 else { throw FixtureError("chown \(path): \(result)") }
    }
}
