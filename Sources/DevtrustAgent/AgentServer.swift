import CAgentSocket
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
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
    /// Connections open at once, in all. When they are all taken, a new connection takes the place
    /// of one of the uid that holds the most (and more than the newcomer's uid): no set of users
    /// can keep another user, or root, from connecting.
    public var connections = 256
    /// Connections one uid may hold open at once: beyond it, a new one is refused at once. More
    /// than a person's concurrent commands (50 tokens at once from two users are served).
    public var connectionsPerUser = 32
    /// From accepting a connection to having its whole request.
    public var requestMilliseconds: Int64 = 5_000
    /// From a request being whole to the worker taking it up: beyond it, the client is told that
    /// the agent is busy (a client waits `AgentClient.defaultTimeoutMilliseconds` in all).
    public var waitMilliseconds: Int64 = 20_000
    /// From the reply being ready to its last byte taken by the client.
    public var replyMilliseconds: Int64 = 5_000
    /// Connections accepted in one turn of the loop, so that a flood of connections does not starve the rest.
    public var acceptsPerTurn = 64
    /// A uid's connections refused or dropped before any request of theirs was decided are audited
    /// once in this long, with a count of the rest.
    public var auditMilliseconds: Int64 = 10_000

    public init() {}
}

/// The agent's loop: one thread, every socket non-blocking, one `poll` over the listening socket,
/// the termination pipe, the worker's pipe and every connection. No client can hold it: a
/// connection is read only as far as one request's bound, and closed at its deadline; junk is
/// refused here. A whole request waits its turn for the worker thread (`AgentWorker`), which serves
/// one at a time (the key, the keystore and the TPM are used by one request at a time) while the
/// loop goes on; the turns go round the uids that wait, one request each, so that one user's loop
/// does not starve another's token. Replies go back through the loop.
public final class AgentServer {
    private let listener: Int32
    private let termination: Int32
    private let limits: AgentLimits
    private let say: (String) -> Void
    private let makeHandler: AgentWorker.MakeHandler
    private var connections = [Connection]()
    /// Connections open per uid.
    private var held = [UInt32: Int]()
    /// Whole requests waiting for the worker, per uid in arrival order; and the uids in turn.
    private var waiting = [UInt32: [Connection]]()
    private var turns = [UInt32]()
    /// The connection whose request the worker serves (it may have been closed since); nil: the worker is idle.
    private var serving: UInt64?
    private var nextID: UInt64 = 0
    private var audit: AgentConnectionAudit
    private var terminating = false

    private final class Connection {
        enum Phase {
            /// Its request is being read.
            case reading
            /// Its request is whole and waits for the worker.
            case waiting(AgentRequest)
            /// The worker serves its request.
            case serving
            /// Its reply is being written.
            case replying
        }

        let id: UInt64
        let descriptor: Int32
        let peer: AgentPeer
        var phase = Phase.reading
        /// When it is closed if it gets no further; nil while the worker serves it.
        var deadline: Int64?
        var reader = FrameReader(limit: AgentWire.maximumRequestBytes)
        var reply: [UInt8] = []
        var written = 0

        init(id: UInt64, descriptor: Int32, peer: AgentPeer, deadline: Int64) {
            self.id = id
            self.descriptor = descriptor
            self.peer = peer
            self.deadline = deadline
        }

        var isReading: Bool {
            if case .reading = phase { return true }
            return false
        }

        var isServed: Bool {
            if case .serving = phase { return true }
            return false
        }

        var isWaiting: Bool {
            if case .waiting = phase { return true }
            return false
        }

        var isReplying: Bool {
            if case .replying = phase { return true }
            return false
        }
    }

    /// `listener`: a listening socket, non-blocking; `termination`: a descriptor that becomes
    /// readable when the agent is to stop (`AgentServer.terminationPipe()`); `say`: where the audit
    /// lines go (written from this thread only); `makeHandler`: what serves the requests, made on
    /// the worker thread with the `say` it is given there.
    public init(listener: Int32, termination: Int32, limits: AgentLimits = AgentLimits(), say: @escaping (String) -> Void,
                makeHandler: @escaping @Sendable (_ say: @escaping @Sendable (String) -> Void) -> any AgentRequestHandler) {
        self.listener = listener
        self.termination = termination
        self.limits = limits
        self.say = say
        self.makeHandler = makeHandler
        audit = AgentConnectionAudit(interval: limits.auditMilliseconds)
    }

    /// The read end of a pipe that SIGTERM and SIGINT write to.
    public static func terminationPipe() -> Int32 {
        devtrust_agent_termination_pipe()
    }

    /// Milliseconds of the monotonic clock.
    static func now() -> Int64 {
        MonotonicClock.milliseconds()
    }

    /// Serves until SIGTERM or SIGINT; then accepts no more, finishes the connections in flight
    /// (within their deadlines), stops the worker (which lets the TPM go), and returns.
    public func run() throws(AgentListenerError) {
        let worker = try AgentWorker.start(makeHandler)
        defer { worker.closePipes() }
        while !(terminating && connections.isEmpty && serving == nil) {
            var descriptors = [pollfd(fd: termination, events: Int16(POLLIN), revents: 0), pollfd(fd: worker.readable, events: Int16(POLLIN), revents: 0)]
            let listening = !terminating
            if listening { descriptors.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
            let first = descriptors.count
            // The connections polled: those open now (collecting, accepting and closing change `connections`).
            let polled = connections
            for connection in polled {
                // A waiting or served connection is watched only for its client hanging up (POLLHUP, POLLERR).
                let events = connection.isReading ? POLLIN : connection.isReplying ? POLLOUT : 0
                descriptors.append(pollfd(fd: connection.descriptor, events: Int16(events), revents: 0))
            }
            let soonest = (connections.compactMap(\.deadline) + [audit.nextDue].compactMap { $0 }).min()
            let timeout = soonest.map { Int32(clamping: max(0, $0 - Self.now())) } ?? -1
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            if ready < 0 && errno != EINTR { break }
            if descriptors[0].revents != 0 {
                var byte: UInt8 = 0
                while read(termination, &byte, 1) > 0 {}
                terminating = true
            }
            if descriptors[1].revents != 0 { collect(worker.take()) }
            for (index, connection) in polled.enumerated() where descriptors[first + index].revents != 0 && isOpen(connection) {
                switch connection.phase {
                case .reading: readRequest(connection)
                case .replying: writeReply(connection)
                case .waiting, .serving: close(connection, outcome: "dropped: the client closed the connection before its reply")
                }
            }
            if listening && descriptors[2].revents & Int16(POLLIN) != 0 { acceptConnections() }
            expire()
            dispatch(to: worker)
            writeAudit(audit.due(now: Self.now()))
        }
        worker.stop()
        collect(worker.take())
        writeAudit(audit.all())
    }

    private func isOpen(_ connection: Connection) -> Bool {
        connections.contains { $0 === connection }
    }

    // MARK: Accepting

    private func acceptConnections() {
        for _ in 0..<limits.acceptsPerTurn {
            let descriptor = devtrust_agent_accept(listener)
            guard descriptor >= 0 else { return }
            guard let peer = AgentPeer.of(descriptor) else {
                Glibc.close(descriptor)
                continue
            }
            let own = held[peer.uid] ?? 0
            if own >= limits.connectionsPerUser {
                refuseAtOnce(descriptor, peer: peer, why: "uid \(peer.uid) has \(own) connections to the agent open, the most one user may hold")
                continue
            }
            if connections.count >= limits.connections {
                guard let making = room(for: peer.uid, holding: own) else {
                    refuseAtOnce(descriptor, peer: peer, why: "the agent has \(connections.count) connections open, the most it holds, and no user holds more than uid \(peer.uid)")
                    continue
                }
                evict(making, for: peer)
            }
            nextID += 1
            let connection = Connection(id: nextID, descriptor: descriptor, peer: peer, deadline: Self.now() + limits.requestMilliseconds)
            connections.append(connection)
            held[peer.uid, default: 0] += 1
        }
    }

    /// The connection to close so that a newcomer of `uid`, which holds `own`, gets one when all are
    /// taken: one of the uid that holds the most, and more than `own` (so that no set of users can
    /// keep a new one out, and two users cannot take turns evicting each other's one connection):
    /// its oldest still reading its request, else its oldest whose reply is not taken yet, else its
    /// newest waiting for the worker (never the one the worker serves). Nil when no uid holds more.
    private func room(for uid: UInt32, holding own: Int) -> Connection? {
        var most: (uid: UInt32, count: Int)?
        // In the connections' order: of uids that hold as many, the one with the oldest connection.
        for connection in connections where !connection.isServed {
            let count = held[connection.peer.uid] ?? 0
            if count > own && count > (most?.count ?? 0) { most = (connection.peer.uid, count) }
        }
        guard let most else { return nil }
        let theirs = connections.filter { $0.peer.uid == most.uid }
        return theirs.first(where: \.isReading) ?? theirs.first(where: \.isReplying) ?? theirs.last(where: \.isWaiting)
    }

    private func evict(_ connection: Connection, for newcomer: AgentPeer) {
        let why = "the agent holds \(limits.connections) connections, the most it holds, uid \(connection.peer.uid) the most of them: "
            + "this one was closed to make room for uid \(newcomer.uid)'s"
        // A client still sending, or waiting, is told why; one whose reply is half written gets no second one.
        if !connection.isReplying { sendRefusal(connection.descriptor, why: why) }
        close(connection, outcome: "dropped: \(why)")
    }

    /// Says why, if the socket takes it at once (a new socket's buffer is empty), and closes.
    private func refuseAtOnce(_ descriptor: Int32, peer: AgentPeer, why: String) {
        sendRefusal(descriptor, why: why)
        Glibc.close(descriptor)
        record(AgentAuditRecord(peer: peer, operation: nil, outcome: "refused: \(why)"))
    }

    private func sendRefusal(_ descriptor: Int32, why: String) {
        let reply = AgentWire.frame(AgentReply.failure(ErrorClassification(.failure, summary: "the devtrust agent refused the connection: \(why)",
                                                                           hint: ErrorHint("try again in a moment", joinedBy: "; "))).json)
        _ = reply.withUnsafeBytes { send(descriptor, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    // MARK: Reading, waiting, serving

    private func readRequest(_ connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: max(1, min(connection.reader.wanted, 16 * 1024)))
        let count = buffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress!, $0.count, 0) }
        if count < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            return close(connection, outcome: "dropped: \(String(cString: strerror(errno)))")
        }
        if count == 0 {
            return close(connection, outcome: connection.reader.bufferedCount == 0 ? "dropped: closed without a request"
                         : "dropped: closed during its request")
        }
        connection.reader.append(buffer.prefix(count))
        switch connection.reader.state {
        case .incomplete:
            return
        case .empty:
            respond(connection, .failure(AgentProtocolError("an empty frame").classification), outcome: "refused: an empty frame")
        case let .tooLarge(length):
            let message = "a request of \(length) bytes, larger than the \(AgentWire.maximumRequestBytes) a request may be"
            respond(connection, .failure(AgentProtocolError(message).classification), outcome: "refused: \(message)")
        case let .complete(bytes, trailing):
            if trailing {
                let message = "bytes after the request (one request per connection)"
                return respond(connection, .failure(AgentProtocolError(message).classification), outcome: "refused: \(message)")
            }
            do {
                wait(connection, for: try AgentRequest(json: bytes))
            } catch {
                respond(connection, .failure(error.classification), outcome: "refused: \(error.message)")
            }
        }
    }

    /// Puts a whole request in its uid's line for the worker.
    private func wait(_ connection: Connection, for request: AgentRequest) {
        connection.phase = .waiting(request)
        connection.deadline = Self.now() + limits.waitMilliseconds
        let uid = connection.peer.uid
        if waiting[uid] == nil { turns.append(uid) }
        waiting[uid, default: []].append(connection)
    }

    private func leaveLine(_ connection: Connection) {
        let uid = connection.peer.uid
        guard var line = waiting[uid] else { return }
        line.removeAll { $0 === connection }
        if line.isEmpty {
            waiting[uid] = nil
            turns.removeAll { $0 == uid }
        } else {
            waiting[uid] = line
        }
    }

    /// When the worker is idle: the next uid in turn's oldest request (and that uid to the back of
    /// the turns, when it has more waiting).
    private func dispatch(to worker: AgentWorker) {
        guard serving == nil, !turns.isEmpty else { return }
        let uid = turns.removeFirst()
        guard var line = waiting[uid], !line.isEmpty else { return }
        let connection = line.removeFirst()
        if line.isEmpty {
            waiting[uid] = nil
        } else {
            waiting[uid] = line
            turns.append(uid)
        }
        guard case let .waiting(request) = connection.phase else { return }
        connection.phase = .serving
        connection.deadline = nil
        serving = connection.id
        worker.give(AgentWorker.Job(id: connection.id, peer: connection.peer, request: request))
    }

    /// The worker's replies (to connections still open) and lines.
    private func collect(_ output: AgentWorker.Output) {
        output.lines.forEach(say)
        for (id, reply) in output.replies {
            if serving == id { serving = nil }
            // The handler audited what it decided.
            if let connection = connections.first(where: { $0.id == id }) { respond(connection, reply, outcome: nil) }
        }
    }

    // MARK: Replying, closing

    /// Starts writing `reply`; `outcome`: audited here (a request the handler never saw).
    private func respond(_ connection: Connection, _ reply: AgentReply, outcome: String?) {
        if let outcome { record(AgentAuditRecord(peer: connection.peer, operation: nil, outcome: outcome)) }
        var frame = AgentWire.frame(reply.json)
        if frame.count > AgentWire.headerBytes + AgentWire.maximumReplyBytes {
            frame = AgentWire.frame(AgentReply.failure(ErrorClassification(.failure, summary: "the devtrust agent's reply was too large")).json)
        }
        if connection.isWaiting { leaveLine(connection) }
        connection.phase = .replying
        connection.reply = frame
        connection.deadline = Self.now() + limits.replyMilliseconds
        // Most replies fit the socket's buffer: written at once, without another turn of the loop.
        writeReply(connection)
    }

    private func writeReply(_ connection: Connection) {
        while connection.written < connection.reply.count {
            let count = connection.reply.withUnsafeBytes { send(connection.descriptor, $0.baseAddress! + connection.written, $0.count - connection.written,
                                                                Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { return }
                return close(connection, outcome: nil)
            }
            connection.written += count
        }
        close(connection, outcome: nil)
    }

    /// Closes a connection, whatever its phase (a served one's reply is then not written).
    private func close(_ connection: Connection, outcome: String?) {
        Glibc.close(connection.descriptor)
        if connection.isWaiting { leaveLine(connection) }
        connections.removeAll { $0 === connection }
        let uid = connection.peer.uid
        held[uid] = (held[uid] ?? 1) - 1
        if held[uid] == 0 { held[uid] = nil }
        if let outcome { record(AgentAuditRecord(peer: connection.peer, operation: nil, outcome: outcome)) }
    }

    private func expire() {
        let now = Self.now()
        for connection in connections {
            guard let deadline = connection.deadline, deadline <= now else { continue }
            switch connection.phase {
            case .reading:
                close(connection, outcome: "dropped: no whole request within \(limits.requestMilliseconds) ms")
            case .waiting:
                let busy = ErrorClassification(.tpm, summary: "the devtrust agent is busy: your request waited \(limits.waitMilliseconds / 1000) s for the machine key, "
                                               + "which serves one request at a time (a TPM signs in 0.1-0.6 s)",
                                               hint: ErrorHint("try again in a moment; if it keeps happening, the agent's log says who asks (journalctl -u devtrust)",
                                                               joinedBy: "; "))
                respond(connection, .failure(busy), outcome: "refused: busy, waited \(limits.waitMilliseconds) ms for the worker")
            case .replying:
                close(connection, outcome: "dropped: the reply was not taken within \(limits.replyMilliseconds) ms")
            case .serving:
                break
            }
        }
    }

    // MARK: The audit

    /// A line of the server's own (a connection refused or dropped, a request it could not read):
    /// said, or counted into its uid's next line.
    private func record(_ record: AgentAuditRecord) {
        writeAudit(audit.record(record, now: Self.now()))
    }

    private func writeAudit(_ records: [AgentAuditRecord]) {
        for record in records { say(record.line) }
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

    /// What of a server a line shows (a base URL is far shorter; the agent takes up to 512 bytes).
    public static let maximumServerBytes = 256
    /// What of an outcome a line shows (a refusal may repeat what the client sent: a server, an id, a field's name).
    public static let maximumOutcomeBytes = 1024

    /// `devtrust agent: uid=1000 pid=4242 op=token server="https://idp" jti="..." outcome="ok"`: the
    /// texts a client chose (a server, an outcome that repeats what it sent) are JSON strings, so
    /// that no line break or quote in them can make a line of their own, and shortened
    /// (`shortened`), so that a line stays a line, whatever the client sent.
    public var line: String {
        var words = ["devtrust agent: uid=\(peer.uid)", "pid=\(peer.pid)", "op=\(operation ?? "-")"]
        if let server { words.append("server=" + JSONWriter.string(.string(Self.shortened(server, limit: Self.maximumServerBytes)))) }
        if let jti { words.append("jti=" + JSONWriter.string(.string(jti))) }
        words.append("outcome=" + JSONWriter.string(.string(Self.shortened(outcome, limit: Self.maximumOutcomeBytes))))
        return words.joined(separator: " ")
    }

    /// `text` cut where its JSON string would pass `limit` bytes (counting 6 for every character but
    /// printable ASCII, the most an escape or a character takes), with how much was cut:
    /// `https://idp.example/aaaa…(+300 bytes)`.
    static func shortened(_ text: String, limit: Int) -> String {
        var written = 0
        let scalars = text.unicodeScalars
        for index in scalars.indices {
            let scalar = scalars[index]
            written += (0x20...0x7E).contains(scalar.value) ? (scalar == "\"" || scalar == "\\" ? 2 : 1) : 6
            if written > limit {
                let kept = String(scalars[..<index])
                return kept + "…(+\(text.utf8.count - kept.utf8.count) bytes)"
            }
        }
        return text
    }
}
