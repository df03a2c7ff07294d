import CAgentSocket
import DevtrustEncoding
import DevtrustErrors
import Glibc

/// Who is at the other end of a connection, as the kernel recorded it when they connected
/// (SO_PEERCRED): the only identity the agent knows its clients by.
public struct AgentPeer: Equatable, Sendable {
    public let uid: UInt32
    public let gid: UInt32
    public let pid: Int32

    public init(uid: UInt32, gid: UInt32, pid: Int32) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }

    /// The kernel's record of the peer of a connected Unix socket.
    public static func of(_ descriptor: Int32) -> AgentPeer? {
        var uid: UInt32 = 0, gid: UInt32 = 0, pid: Int32 = 0
        guard devtrust_agent_peer_credentials(descriptor, &uid, &gid, &pid) == 0 else { return nil }
        return AgentPeer(uid: uid, gid: gid, pid: pid)
    }
}

/// The bounds on the agent's connections: what one client, or one user, can hold of it.
public struct AgentLimits: Sendable {
    /// Connections open at once, in all.
    public var connections = 256
    /// Connections one uid may hold open at once: beyond it, a new one is refused at once.
    public var connectionsPerUser = 64
    /// From accepting a connection to having its whole request.
    public var requestMilliseconds: Int64 = 5_000
    /// From the reply being ready to its last byte taken by the client.
    public var replyMilliseconds: Int64 = 5_000
    /// Connections accepted in one turn of the loop, so that a flood of connections does not starve the rest.
    public var acceptsPerTurn = 64

    public init() {}
}

/// The agent's loop: one thread, every socket non-blocking, one `poll` over the listening socket,
/// the termination pipe and every connection. No client can hold it: a connection is read only as
/// far as one request's bound, and closed at its deadline; a request is served as soon as it is
/// whole. Requests are served one at a time (the key, the keystore and the TPM are used by one
/// request at a time), each as soon as it is whole.
public final class AgentServer {
    /// What the server does with a request: the reply, given who asked.
    public typealias Handler = (AgentPeer, AgentRequest) -> AgentReply

    private let listener: Int32
    private let termination: Int32
    private let limits: AgentLimits
    private let handle: Handler
    private let audit: (AgentAuditRecord) -> Void
    private var connections = [Connection]()
    private var terminating = false

    private final class Connection {
        let descriptor: Int32
        let peer: AgentPeer
        var deadline: Int64
        var reader = FrameReader(limit: AgentWire.maximumRequestBytes)
        /// The reply being written, and how much of it is out; nil while reading.
        var reply: [UInt8]?
        var written = 0

        init(descriptor: Int32, peer: AgentPeer, deadline: Int64) {
            self.descriptor = descriptor
            self.peer = peer
            self.deadline = deadline
        }
    }

    /// `listener`: a listening socket, non-blocking; `termination`: a descriptor that becomes
    /// readable when the agent is to stop (`AgentServer.terminationPipe()`).
    public init(listener: Int32, termination: Int32, limits: AgentLimits = AgentLimits(), audit: @escaping (AgentAuditRecord) -> Void,
                handle: @escaping Handler) {
        self.listener = listener
        self.termination = termination
        self.limits = limits
        self.audit = audit
        self.handle = handle
    }

    /// The read end of a pipe that SIGTERM and SIGINT write to.
    public static func terminationPipe() -> Int32 {
        devtrust_agent_termination_pipe()
    }

    /// Milliseconds of the monotonic clock.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    /// Serves until SIGTERM or SIGINT; then accepts no more, finishes the connections in flight
    /// (within their deadlines), and returns.
    public func run() {
        while !(terminating && connections.isEmpty) {
            var descriptors = [pollfd(fd: termination, events: Int16(POLLIN), revents: 0)]
            if !terminating { descriptors.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
            let first = descriptors.count
            for connection in connections {
                descriptors.append(pollfd(fd: connection.descriptor, events: Int16(connection.reply == nil ? POLLIN : POLLOUT), revents: 0))
            }
            let soonest = connections.map(\.deadline).min()
            let timeout = soonest.map { Int32(clamping: max(0, $0 - Self.now())) } ?? -1
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            if ready < 0 && errno != EINTR { break }
            if descriptors[0].revents != 0 {
                var byte: UInt8 = 0
                while read(termination, &byte, 1) > 0 {}
                terminating = true
            }
            // The connections first: those polled are those in `connections` now (accepting appends).
            let polled = connections
            for (index, connection) in polled.enumerated() where descriptors[first + index].revents != 0 {
                if connection.reply == nil { readRequest(connection) } else { writeReply(connection) }
            }
            if !terminating && descriptors[1].revents & Int16(POLLIN) != 0 { acceptConnections() }
            expire()
        }
    }

    private func acceptConnections() {
        for _ in 0..<limits.acceptsPerTurn {
            let descriptor = devtrust_agent_accept(listener)
            guard descriptor >= 0 else { return }
            guard let peer = AgentPeer.of(descriptor) else {
                close(descriptor)
                continue
            }
            let held = connections.filter { $0.peer.uid == peer.uid }.count
            if connections.count >= limits.connections || held >= limits.connectionsPerUser {
                let why = held >= limits.connectionsPerUser
                    ? "uid \(peer.uid) has \(held) connections to the agent open, the most one user may hold"
                    : "the agent has \(connections.count) connections open, the most it holds"
                refuseAtOnce(descriptor, peer: peer, why: why)
                continue
            }
            connections.append(Connection(descriptor: descriptor, peer: peer, deadline: Self.now() + limits.requestMilliseconds))
        }
    }

    /// Says why, if the socket takes it at once (a new socket's buffer is empty), and closes.
    private func refuseAtOnce(_ descriptor: Int32, peer: AgentPeer, why: String) {
        let reply = AgentWire.frame(AgentReply.failure(ErrorClassification(.failure, summary: "the devtrust agent refused the connection: \(why)",
                                                                           hint: ErrorHint("try again in a moment", joinedBy: "; "))).json)
        _ = reply.withUnsafeBytes { send(descriptor, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        close(descriptor)
        audit(AgentAuditRecord(peer: peer, operation: nil, outcome: "refused: \(why)"))
    }

    private func readRequest(_ connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: max(1, min(connection.reader.wanted, 16 * 1024)))
        let count = buffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress!, $0.count, 0) }
        if count < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            return drop(connection, outcome: "dropped: \(String(cString: strerror(errno)))")
        }
        if count == 0 {
            return drop(connection, outcome: connection.reader.bufferedCount == 0 ? "dropped: closed without a request"
                        : "dropped: closed during its request")
        }
        connection.reader.append(buffer.prefix(count))
        switch connection.reader.state {
        case .incomplete:
            return
        case .empty:
            respond(connection, .failure(AgentProtocolError("an empty frame").classification), operation: nil, outcome: "refused: an empty frame")
        case let .tooLarge(length):
            let message = "a request of \(length) bytes, larger than the \(AgentWire.maximumRequestBytes) a request may be"
            respond(connection, .failure(AgentProtocolError(message).classification), operation: nil, outcome: "refused: \(message)")
        case let .complete(bytes, trailing):
            if trailing {
                let message = "bytes after the request (one request per connection)"
                return respond(connection, .failure(AgentProtocolError(message).classification), operation: nil, outcome: "refused: \(message)")
            }
            let request: AgentRequest
            do {
                request = try AgentRequest(json: bytes)
            } catch {
                return respond(connection, .failure(error.classification), operation: nil, outcome: "refused: \(error.message)")
            }
            // The handler audits what it decided; the server what it could not read.
            respond(connection, handle(connection.peer, request), operation: request.operation, outcome: nil)
        }
    }

    /// Starts writing `reply`; `outcome`: audited here (a request the handler never saw).
    private func respond(_ connection: Connection, _ reply: AgentReply, operation: String?, outcome: String?) {
        if let outcome { audit(AgentAuditRecord(peer: connection.peer, operation: operation, outcome: outcome)) }
        var frame = AgentWire.frame(reply.json)
        if frame.count > AgentWire.headerBytes + AgentWire.maximumReplyBytes {
            frame = AgentWire.frame(AgentReply.failure(ErrorClassification(.failure, summary: "the devtrust agent's reply was too large")).json)
        }
        connection.reply = frame
        connection.deadline = Self.now() + limits.replyMilliseconds
        // Most replies fit the socket's buffer: written at once, without another turn of the loop.
        writeReply(connection)
    }

    private func writeReply(_ connection: Connection) {
        guard let reply = connection.reply else { return }
        while connection.written < reply.count {
            let count = reply.withUnsafeBytes { send(connection.descriptor, $0.baseAddress! + connection.written, $0.count - connection.written,
                                                     Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { return }
                return drop(connection, outcome: nil)
            }
            connection.written += count
        }
        close(connection.descriptor)
        connections.removeAll { $0 === connection }
    }

    private func drop(_ connection: Connection, outcome: String?) {
        close(connection.descriptor)
        connections.removeAll { $0 === connection }
        if let outcome { audit(AgentAuditRecord(peer: connection.peer, operation: nil, outcome: outcome)) }
    }

    private func expire() {
        let now = Self.now()
        for connection in connections where connection.deadline <= now {
            drop(connection, outcome: connection.reply == nil
                 ? "dropped: no whole request within \(limits.requestMilliseconds) ms" : "dropped: the reply was not taken within \(limits.replyMilliseconds) ms")
        }
    }
}

/// One line of the agent's audit, on stderr (journald under systemd): who (the kernel's uid and
/// pid), what, for which server, the token's jti, and the outcome. Never a token, a signature, a
/// challenge or a claim's value.
public struct AgentAuditRecord: Equatable, Sendable {
    public let peer: AgentPeer
    public let operation: String?
    public let server: String?
    public let jti: String?
    public let outcome: String

    public init(peer: AgentPeer, operation: String?, server: String? = nil, jti: String? = nil, outcome: String) {
        self.peer = peer
        self.operation = operation
        self.server = server
        self.jti = jti
        self.outcome = outcome
    }

    /// `devtrust agent: uid=1000 pid=4242 op=token server="https://idp" jti="..." outcome="ok"`: the
    /// texts a client chose (a server) are JSON strings, so that no line break or quote in them
    /// can make a line of their own.
    public var line: String {
        var words = ["devtrust agent: uid=\(peer.uid)", "pid=\(peer.pid)", "op=\(operation ?? "-")"]
        if let server { words.append("server=" + JSONWriter.string(.string(server))) }
        if let jti { words.append("jti=" + JSONWriter.string(.string(jti))) }
        words.append("outcome=" + JSONWriter.string(.string(outcome)))
        return words.joined(separator: " ")
    }
}
