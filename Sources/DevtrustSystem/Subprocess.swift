import DevtrustErrors
import Glibc

public struct SubprocessResult: Sendable {
    public let status: Int32
    public let output: [UInt8]
}

public enum SubprocessError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotStart(String, Int32)
    case timedOut(String, milliseconds: Int)
    case outputTooLarge(String, limit: Int)

    public var description: String {
        switch self {
        case let .cannotStart(program, code): return "cannot run \(program): \(String(cString: strerror(code)))"
        case let .timedOut(program, milliseconds): return "\(program) did not finish within \(milliseconds) ms and was stopped"
        case let .outputTooLarge(program, limit): return "\(program) printed more than \(limit) bytes"
        }
    }
}

/// Runs a program (no shell) with stdin and stderr on /dev/null, collecting
/// its stdout up to a limit, and kills it when it overruns its time.
public enum Subprocess {
    public static func run(_ arguments: [String], timeoutMilliseconds: Int, outputLimit: Int = 65_536) throws(SubprocessError) -> SubprocessResult {
        let program = arguments.first ?? ""
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw .cannotStart(program, errno) }
        // Only the child's copy (dup2'd to its stdout) may stay open across exec.
        _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, program, &actions, nil, &pointers, environ)
        close(pipeEnds[1])
        guard spawned == 0 else {
            close(pipeEnds[0])
            throw .cannotStart(program, spawned)
        }
        defer { close(pipeEnds[0]) }
        var output = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = Int64(deadline.tv_sec) * 1000 + Int64(deadline.tv_nsec) / 1_000_000 + Int64(timeoutMilliseconds)
        var failure: SubprocessError?
        while true {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let remaining = end - (Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
            guard remaining > 0 else { failure = .timedOut(program, milliseconds: timeoutMilliseconds); break }
            var poller = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(remaining))
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { continue }
            let count = read(pipeEnds[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            output += buffer.prefix(count)
            if output.count > outputLimit { failure = .outputTooLarge(program, limit: outputLimit); break }
        }
        if failure != nil { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if let failure { throw failure }
        let exitCode = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return SubprocessResult(status: exitCode, output: output)
    }
}

extension SubprocessError: ClassifiedError {
    /// A program devtrust starts (a collector, nft) could not be run or did not finish. A failure (exit 1), in its own words.
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
}
