import CAgentSocket
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
import Glibc

/// Where the agent's socket is, as the command line resolves it.
public enum AgentSocketLocation {
    /// Where the agent listens by default, and where commands look for it (`DEVTRUST_AGENT`, `--agent`).
    public static let defaultPath = "/run/devtrust/agent.sock"
}

/// No agent answered, or it stopped answering: its socket is missing, nothing listens there, it
/// closed the connection before its reply (it stopped, or was killed), or it did not answer in
/// time (it is busy: many requests wait for its TPM, or the TPM hangs). A failure of the side that
/// holds the key, like a TPM that does not answer (exit 6).
public struct AgentUnavailable: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// There is no socket at the path.
        case noSocket
        /// The socket is there but nothing accepts on it (the agent is not running).
        case refused
        /// The socket cannot be opened by this user.
        case permissionDenied
        /// The agent closed the connection before its reply was whole.
        case closedDuringRequest
        /// No reply within `seconds`.
        case timedOut(seconds: Int)
        /// The reply is not one (a different program at the socket?).
        case unreadableReply(String)
        /// What listens there runs as another user than root or the caller: not the system agent
        /// (another user who took the socket's name), so nothing is sent to it.
        case notTheAgent(uid: UInt32)
        /// The caller is in a user namespace where the machine's root has no uid: the kernel shows
        /// the listener (the agent's root) as the overflow uid, which cannot be told from anyone's.
        case rootNotMapped(uid: UInt32)
        /// Another error of the socket: the operation and errno.
        case io(operation: String, errno: Int32)
    }

    public let socket: String
    public let reason: Reason

    public init(socket: String, reason: Reason) {
        self.socket = socket
        self.reason = reason
    }

    public var description: String { classification.message }
}

extension AgentUnavailable: ClassifiedError {
    public var classification: ErrorClassification {
        let what: String
        switch reason {
        case .noSocket: what = "there is no devtrust agent socket at \(socket)"
        case .refused: what = "no devtrust agent answers at \(socket) (the socket is there, but the agent is not running)"
        case .permissionDenied: what = "this user may not open the devtrust agent's socket \(socket)"
        case .closedDuringRequest: what = "the devtrust agent at \(socket) closed the connection before it answered: the agent is down (it stopped or was killed)"
        case let .timedOut(seconds):
            what = "the devtrust agent at \(socket) is busy: it did not answer within \(seconds) s (it signs one request at a time, "
                + "and a TPM takes up to 0.6 s a signature)"
        case let .unreadableReply(detail): what = "the program at \(socket) did not answer as the devtrust agent does (\(detail))"
        case let .io(operation, code): what = "cannot \(operation) the devtrust agent's socket \(socket): \(String(cString: strerror(code)))"
        case let .notTheAgent(uid):
            what = "what answers at \(socket) runs as uid \(uid), neither root nor you: it is not the devtrust agent, and nothing was sent to it"
        case let .rootNotMapped(uid):
            what = "what answers at \(socket) shows as uid \(uid) in this user namespace, which has no uid for the machine's root: "
                + "devtrust cannot tell the agent from another user's program, so nothing was sent to it"
        }
        let ownKeystore = "or use a keystore of your own with --keystore DIR"
        if case .timedOut = reason {
            // Running, and taking the connection: nothing to start.
            return ErrorClassification(.tpm, summary: what, hint: ErrorHint("try again in a moment; if it keeps happening, the agent's log (journalctl -u devtrust.service) says who asks it for what, and whether its TPM answers",
                                                                            joinedBy: "; "))
        }
        if case .notTheAgent = reason {
            return ErrorClassification(.tpm, summary: what, hint: ErrorHint("tell the machine's administrator (another user's program holds the agent's socket name); \(ownKeystore)",
                                                                            joinedBy: "; "))
        }
        if case .rootNotMapped = reason {
            return ErrorClassification(.tpm, summary: what, hint: ErrorHint("run devtrust outside the user namespace (unshare, a rootless container) and pass its token in; \(ownKeystore)",
                                                                            joinedBy: "; "))
        }
        if reason == .permissionDenied {
            return ErrorClassification(.tpm, summary: what, hint: ErrorHint("the socket's mode (SocketMode= of devtrust.socket) says who may connect: ask the machine's administrator; \(ownKeystore)",
                                                                            joinedBy: "; "))
        }
        let start = socket == AgentSocketLocation.defaultPath
            ? "`sudo systemctl start devtrust.socket`, or run `sudo devtrust agent`"
            : "run `sudo devtrust agent --socket \(socket)`"
        return ErrorClassification(.tpm, summary: what, hint: ErrorHint("start the agent (\(start)); \(ownKeystore)", joinedBy: "; "))
    }
}

/// A client of the agent: one connection per request, bounded in time. Knows nothing of who the
/// caller is: the agent asks the kernel.
public struct AgentClient: Sendable {
    /// As long as a command waits on a TPM (`SigningDeadline.commandSeconds`): the agent may be signing with one.
    public static let defaultTimeoutMilliseconds = 30_000

    public let socket: String
    public let timeoutMilliseconds: Int

    public init(socket: String, timeoutMilliseconds: Int = AgentClient.defaultTimeoutMilliseconds) {
        self.socket = socket
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// The agent's result for `request`; throws its refusal (`AgentRefusal`) or why it did not answer (`AgentUnavailable`).
    public func call(_ request: AgentRequest) throws -> JSONObject {
        let reply = try exchange(AgentWire.frame(request.json))
        switch reply {
        case let .success(object): return object
        case let .failure(classification): throw AgentRefusal(classification)
        }
    }

    /// One frame out, one reply back (a test sends frames of its own).
    public func exchange(_ frame: [UInt8]) throws(AgentUnavailable) -> AgentReply {
        let descriptor = devtrust_agent_connect(socket, Int32(timeoutMilliseconds))
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR: throw unavailable(.noSocket)
            case ECONNREFUSED: throw unavailable(.refused)
            case EACCES, EPERM: throw unavailable(.permissionDenied)
            case EAGAIN: throw unavailable(.timedOut(seconds: timeoutMilliseconds / 1000))
            default: throw unavailable(.io(operation: "connect to", errno: code))
            }
        }
        defer { close(descriptor) }
        // The kernel's record of who made the listening socket (systemd, or the agent: root; or an
        // agent of the caller's own): another user's program at the name gets no request, and gives no answer.
        guard let server = AgentPeer.of(descriptor) else { throw unavailable(.io(operation: "identify", errno: errno)) }
        if let refusal = Self.refusal(ofListener: server.uid, caller: geteuid(), overflowUID: Self.overflowUID(),
                                      initialNamespace: { Self.isInitialUserNamespace() }) {
            throw unavailable(refusal)
        }
        // The timeout bounds the whole exchange, not each read: a listener that sends a byte now and
        // then (root's, or the caller's own) does not hold the command for longer.
        let deadline = MonotonicClock.milliseconds() + Int64(timeoutMilliseconds)
        do {
            try send(frame, on: descriptor, by: deadline)
        } catch let error where error.reason == .closedDuringRequest {
            // The agent may have refused at once (too many connections) and closed: its reply is there to read.
        }
        let header = try receive(AgentWire.headerBytes, on: descriptor, by: deadline)
        let length = Int(UInt32(header[0]) << 24 | UInt32(header[1]) << 16 | UInt32(header[2]) << 8 | UInt32(header[3]))
        guard length > 0, length <= AgentWire.maximumReplyBytes else { throw unavailable(.unreadableReply("a reply of \(length) bytes")) }
        let body = try receive(length, on: descriptor, by: deadline)
        guard let reply = AgentReply(json: body) else { throw unavailable(.unreadableReply("not a reply")) }
        return reply
    }

    private func unavailable(_ reason: AgentUnavailable.Reason) -> AgentUnavailable {
        AgentUnavailable(socket: socket, reason: reason)
    }

    /// Sets the socket's send and receive timeouts to what is left until `deadline`; throws when nothing is.
    private func bound(_ descriptor: Int32, by deadline: Int64) throws(AgentUnavailable) {
        let left = deadline - MonotonicClock.milliseconds()
        guard left > 0 else { throw unavailable(.timedOut(seconds: timeoutMilliseconds / 1000)) }
        var timeout = timeval(tv_sec: Int(left / 1000), tv_usec: Int((left % 1000) * 1000))
        let size = socklen_t(MemoryLayout<timeval>.size)
        guard setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, size) == 0,
              setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, size) == 0 else {
            throw unavailable(.io(operation: "set a timeout on", errno: errno))
        }
    }

    private func send(_ bytes: [UInt8], on descriptor: Int32, by deadline: Int64) throws(AgentUnavailable) {
        var sent = 0
        while sent < bytes.count {
            try bound(descriptor, by: deadline)
            // MSG_NOSIGNAL: an agent gone is an error to report, not a SIGPIPE that ends the command.
            let count = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN { throw unavailable(.timedOut(seconds: timeoutMilliseconds / 1000)) }
                if code == EPIPE || code == ECONNRESET { throw unavailable(.closedDuringRequest) }
                throw unavailable(.io(operation: "write to", errno: code))
            }
            sent += count
        }
    }

    private func receive(_ count: Int, on descriptor: Int32, by deadline: Int64) throws(AgentUnavailable) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            try bound(descriptor, by: deadline)
            let got = bytes.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress! + filled, $0.count - filled, 0) }
            if got < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN { throw unavailable(.timedOut(seconds: timeoutMilliseconds / 1000)) }
                if code == ECONNRESET { throw unavailable(.closedDuringRequest) }
                throw unavailable(.io(operation: "read from", errno: code))
            }
            if got == 0 { throw unavailable(.closedDuringRequest) }
            filled += got
        }
        return bytes
    }

    /// Why a listener of `listener` (its uid as SO_PEERCRED gives it) is not spoken to, or nil when it
    /// is root's or the caller's. In a user namespace the kernel shows any uid the namespace does not
    /// map (the machine's root, another user) as the overflow uid: it names nobody, also when it is
    /// the caller's own (a namespace without a uid map) or 0 (an overflow uid set to 0). A map that
    /// cannot be read (`initialNamespace` nil: a /proc without it) proves nothing: the overflow uid
    /// names nobody then too. The map is read only for a listener of the overflow uid.
    static func refusal(ofListener listener: UInt32, caller: UInt32, overflowUID: UInt32,
                        initialNamespace: () -> Bool?) -> AgentUnavailable.Reason? {
        if listener == overflowUID, initialNamespace() != true { return .rootNotMapped(uid: listener) }
        return listener == 0 || listener == caller ? nil : .notTheAgent(uid: listener)
    }

    /// Whether this process is in the machine's own user namespace, whose /proc/self/uid_map is the
    /// one line "0 0 4294967295" (an empty map: a namespace that maps no uid yet); nil when the map
    /// cannot be read.
    static func isInitialUserNamespace(uidMap path: String = "/proc/self/uid_map") -> Bool? {
        guard let text = Self.smallFile(path) else { return nil }
        let lines = text.split(separator: UInt8(ascii: "\n"))
        guard lines.count == 1 else { return false }
        return lines[0].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) } == ["0", "0", "4294967295"]
    }

    /// /proc/sys/kernel/overflowuid: what a user namespace shows for a uid it does not map (65534 unless changed).
    static func overflowUID(path: String = "/proc/sys/kernel/overflowuid") -> UInt32 {
        guard let text = Self.smallFile(path) else { return 65534 }
        return UInt32(String(decoding: text.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }, as: UTF8.self)) ?? 65534
    }

    /// The first 4096 bytes of a file of /proc (empty for an empty file), or nil when it cannot be read.
    private static func smallFile(_ path: String) -> ArraySlice<UInt8>? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
        return count >= 0 ? bytes[..<count] : nil
    }
}
