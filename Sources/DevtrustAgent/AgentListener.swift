import CAgentSocket
import DevtrustErrors
import DevtrustSystem
import Glibc

/// Where the agent listens: the socket systemd passes (socket activation: `LISTEN_PID`, `LISTEN_FDS`,
/// the descriptor 3), or one it makes at a path.
public struct AgentListener {
    /// The listening socket, non-blocking.
    public let descriptor: Int32
    /// The path it made (and removes when it stops); nil for one systemd passed (systemd owns it).
    public let madePath: String?
    /// The socket file's inode as made: only that file is removed.
    let madeInode: UInt64
    public let description: String

    /// systemd's first passed descriptor.
    static let firstPassed: Int32 = 3

    /// The socket systemd passed, when the environment says this process was given one: `LISTEN_PID`
    /// is this process and `LISTEN_FDS` is 1. The variables are removed, so that the programs the
    /// agent runs do not take them for their own. Nil when none was passed.
    public static func activated(environment: [String: String]) throws(AgentListenerError) -> AgentListener? {
        guard let pid = environment["LISTEN_PID"], let count = environment["LISTEN_FDS"] else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard Int32(pid) == getpid() else { return nil }
        guard count == "1" else { throw .activation("systemd passed \(count) sockets; the agent takes exactly one (one ListenStream= in devtrust.socket)") }
        switch devtrust_agent_is_listening_unix_stream(firstPassed) {
        case 1: break
        case 0: throw .activation("the descriptor systemd passed is not a listening Unix stream socket (ListenStream=PATH in devtrust.socket)")
        default: throw .activation("systemd's descriptor \(firstPassed) is not open")
        }
        guard devtrust_agent_prepare_passed(firstPassed) == 0 else { throw .io(path: "descriptor 3", operation: "prepare", errno: errno) }
        return AgentListener(descriptor: firstPassed, madePath: nil, madeInode: 0, description: "the socket systemd passed")
    }

    /// A socket at `path`, mode 0666 (who may use the agent is its policy's decision, by the kernel's uid),
    /// in a directory made 0755 when missing. A socket left there by an agent that is gone is replaced;
    /// one an agent still answers on, or a file that is no socket, is not.
    public static func bind(path: String) throws(AgentListenerError) -> AgentListener {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            let directory = String(path[..<slash])
            var prefix = ""
            for component in directory.split(separator: "/") {
                prefix += "/" + component
                if mkdir(prefix, 0o755) == 0 {
                    // Others must reach the socket: the umask does not decide that.
                    chmod(prefix, 0o755)
                } else if errno != EEXIST {
                    throw .io(path: prefix, operation: "create the directory", errno: errno)
                }
            }
        }
        // Only root or the agent's user may be able to put another file at the socket's name, or
        // `chmod` below (which follows a link) could be turned on a file of their choosing.
        let directory = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        var parent = stat()
        guard stat(directory, &parent) == 0 else { throw .io(path: directory, operation: "examine the directory", errno: errno) }
        // FileTrust's rule for what tells devtrust what to trust: root's or the agent's user's, and
        // writable by no one else, sticky or not (in a sticky directory others can still take the
        // socket's name first, and answer clients when the agent stops).
        if let problem = FileTrust.problem(parent) { throw .untrustedDirectory(path: directory, why: problem) }
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path: path) }
            let probe = devtrust_agent_connect(path, 1000)
            if probe >= 0 {
                Glibc.close(probe)
                throw .inUse(path: path)
            }
            guard unlink(path) == 0 || errno == ENOENT else { throw .io(path: path, operation: "remove the stale socket", errno: errno) }
        }
        let descriptor = devtrust_agent_listen(path, 128, 0o666)
        guard descriptor >= 0 else { throw .io(path: path, operation: "listen on", errno: errno) }
        var made = stat()
        _ = lstat(path, &made)
        return AgentListener(descriptor: descriptor, madePath: path, madeInode: UInt64(made.st_ino), description: path)
    }

    /// Stops listening; removes the socket it made, if it is still the one it made.
    public func close() {
        _ = Glibc.close(descriptor)
        var status = stat()
        if let madePath, lstat(madePath, &status) == 0, UInt64(status.st_ino) == madeInode { unlink(madePath) }
    }
}

/// Why the agent cannot listen (exit 1, or 2 for a socket activation that is not set up as the agent needs).
public enum AgentListenerError: Error, Equatable, Sendable, CustomStringConvertible {
    case activation(String)
    case notASocket(path: String)
    case inUse(path: String)
    case untrustedDirectory(path: String, why: String)
    case io(path: String, operation: String, errno: Int32)

    public var description: String { classification.message }
}

extension AgentListenerError: ClassifiedError {
    public var classification: ErrorClassification {
        switch self {
        case let .activation(what):
            return ErrorClassification(.usage, summary: "socket activation: \(what)")
        case let .notASocket(path):
            return ErrorClassification(.failure, summary: "\(path) exists and is not a socket", hint: ErrorHint("the agent replaces only a socket; give another --socket", joinedBy: "; "))
        case let .inUse(path):
            return ErrorClassification(.failure, summary: "a devtrust agent already answers at \(path)", hint: ErrorHint("stop it first, or give another --socket", joinedBy: "; "))
        case let .untrustedDirectory(path, why):
            return ErrorClassification(.failure, summary: "the agent's socket directory \(path) \(why)",
                                       hint: ErrorHint("others could put their own file at the socket's name: use a directory only root (or the agent's user) can write to, "
                                                       + "such as /run/devtrust (mode 0755)", joinedBy: "; "))
        case let .io(path, operation, code):
            return ErrorClassification(.failure, summary: "cannot \(operation) \(path): \(String(cString: strerror(code)))")
        }
    }
}
