import CLoopbackPeer
import DevtrustEncoding
import DevtrustErrors
import Glibc

/// Why the loopback listener stopped without a callback: it could not listen, or nothing came in time.
public enum LoopbackListenerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The address could not be bound or listened on (errno).
    case cannotListen(address: String, code: Int32)
    /// Nothing with this sign-in's state came back before the deadline.
    case timedOut(redirectURI: String, seconds: Int)
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) ended the wait.
    case interrupted(signal: Int32)
    /// The handoff page was asked for again after it had sent a browser on: someone else
    /// running as the user (a forwarder that other users can reach) may hold the URL.
    case handoffReused(url: String)

    public var description: String {
        switch self {
        case let .cannotListen(address, code):
            var text = "cannot listen on \(address) for the browser's redirect: \(String(cString: strerror(code)))"
            if code == EADDRINUSE {
                text += " (another program, or another `devtrust login --browser`, holds that port; wait for it to end, or use a redirect URI without a port so that the system chooses a free one, if the server allows it)"
            }
            return text
        case let .timedOut(redirectURI, seconds):
            return "the browser did not come back to \(redirectURI) within \(seconds) s; run `devtrust login --browser` again (--timeout SECONDS waits longer)"
        case let .interrupted(signal):
            return "interrupted by \(Interrupted.name(of: signal)) while waiting for the browser; nothing was stored"
        case let .handoffReused(url):
            return "the sign-in page \(url) was asked for a second time, so a program running as you other than your browser may have "
                + "opened the sign-in first (a forwarder such as `ssh -D` or a proxy that other users of this machine can reach); "
                + "the sign-in is ended and nothing was stored: stop such a forwarder, then run `devtrust login --browser` again"
        }
    }
}

extension LoopbackListenerError: ClassifiedError {
    /// A network failure, but for a handoff page asked for twice (a failure) and a signal
    /// (interrupted, as every wait a signal ends; `login --browser` ends by it before any report).
    public var classification: ErrorClassification {
        switch self {
        case .handoffReused: return ErrorClassification(.failure, summary: description)
        case let .interrupted(signal): return ErrorClassification(.interrupted(signal: signal), summary: description)
        case .cannotListen, .timedOut: return ErrorClassification(.network, summary: description)
        }
    }
}

/// A request the listener answered and went on waiting after: only a GET of the
/// redirect path, with this sign-in's state, ends the wait.
public enum IgnoredRequest: Equatable, Sendable {
    /// Another path (a favicon, a probe).
    case notFound
    /// Another method than GET on the redirect path.
    case wrongMethod
    /// A Host header that is not the redirect URI's (DNS rebinding, a proxy).
    case wrongHost
    /// The redirect path without this sign-in's state (another sign-in's, a forgery).
    case wrongState
    /// This sign-in's state, but neither a code nor an error.
    case incomplete
    /// Not an HTTP/1.x request.
    case malformed
    /// A request head over the size limit.
    case tooLarge
    /// A client that did not send its request head in time (or at all).
    case tooSlow
    /// A connection whose socket another user of this machine owns (the kernel's word):
    /// answered that the sign-in is someone else's, whatever it asked.
    case otherUser(uid: UInt32)
    /// A connection whose owner the kernel could not name (its end already closed, or
    /// neither NETLINK_SOCK_DIAG nor /proc/net could be read): refused like another user's.
    case unknownOwner
}

/// What the browser came back with.
public enum CallbackOutcome: Equatable, Sendable {
    /// Secret: exchanged once, never printed or logged.
    case code(String)
    /// The server's `error` and `error_description`.
    case error(String, description: String?)
}

/// The pages the listener serves: fixed text, nothing taken from the request.
public enum LoopbackPage: Sendable {
    case signedIn, notSignedIn
    /// For a connection of another user (or of none the kernel can name).
    case notYours
    /// For a second request for the handoff page (the sign-in is ended).
    case openedAlready

    var title: String {
        switch self {
        case .signedIn: return "Signed in"
        case .notSignedIn: return "Sign-in not completed"
        case .notYours: return "This sign-in belongs to someone else"
        case .openedAlready: return "This sign-in page was already opened"
        }
    }

    var text: String {
        switch self {
        case .signedIn: return "devtrust has signed you in. You can close this tab and go back to the terminal."
        case .notSignedIn: return "The sign-in did not complete: the terminal where devtrust runs says why. You can close this tab."
        case .notYours:
            return "This sign-in was started by another user of this computer: only that user's browser can complete it. "
                + "To sign in yourself, run devtrust login --browser in your own session."
        case .openedAlready:
            return "This sign-in page was asked for a second time, so devtrust has ended the sign-in: the terminal where it runs says why."
        }
    }
}

/// The browser's request that ended the wait; its connection stays open until `finish`.
public struct LoopbackCallback: Sendable {
    public let outcome: CallbackOutcome
    let connection: Int32
}

/// One request head, as the listener reads it (RFC 9112 section 2-3, strictly).
public struct LoopbackRequest: Equatable, Sendable {
    public let method: String
    public let target: String
    public let host: String?

    public init(method: String, target: String, host: String?) {
        self.method = method
        self.target = target
        self.host = host
    }

    public enum Reading: Equatable, Sendable {
        case incomplete, tooLarge, malformed
        case request(LoopbackRequest)
    }

    /// Reads a request head from the bytes received so far.
    public static func read(_ bytes: [UInt8], limit: Int) -> Reading {
        guard let end = headEnd(bytes) else { return bytes.count >= limit ? .tooLarge : .incomplete }
        guard end <= limit else { return .tooLarge }
        guard let head = String(validating: bytes[..<end], as: UTF8.self) else { return .malformed }
        // "\r\n" is one Character in Swift: split on it and on a bare "\n".
        var lines = head.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\r\n" || $0 == "\n" })
        // A client may send empty lines before the request line (RFC 9112 section 2.2).
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { return .malformed }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isASCII && $0.isUppercase }),
              parts[1].hasPrefix("/"), parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else { return .malformed }
        var host: String?
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return .malformed }
            let name = line[..<colon]
            guard !name.contains(where: { $0 == " " || $0 == "\t" }) else { return .malformed }
            if name.lowercased() == "host" {
                guard host == nil else { return .malformed }
                host = String(line[line.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" }))
                while let last = host?.last, last == " " || last == "\t" { host?.removeLast() }
            }
        }
        return .request(LoopbackRequest(method: String(parts[0]), target: String(parts[1]), host: host))
    }

    /// The index just past the blank line that ends the head (CRLF CRLF, or LF LF).
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x0A {
                if index + 1 < bytes.count, bytes[index + 1] == 0x0A { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A { return index + 3 }
            }
            index += 1
        }
        return nil
    }

    /// What the listener does with this request: end the wait, or answer and go on.
    public func decision(path expectedPath: String, host expectedHost: String, state expectedState: String) -> Decision {
        let question = target.firstIndex(of: "?")
        let path = question.map { String(target[..<$0]) } ?? target
        guard path == expectedPath else { return .ignore(.notFound) }
        guard method == "GET" else { return .ignore(.wrongMethod) }
        guard let host, host.lowercased() == expectedHost.lowercased() else { return .ignore(.wrongHost) }
        var parameters = [String: String]()
        var repeated = false
        if let question {
            for pair in target[target.index(after: question)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = FormEncoding.unescape(parts[0]) else { continue }
                let value = parts.count == 2 ? FormEncoding.unescape(parts[1]) : ""
                if ["state", "code", "error", "error_description"].contains(name) {
                    if parameters[name] != nil { repeated = true }
                    // A value that is not UTF-8 is kept as a marker that it was there.
                    parameters[name] = value ?? "\u{FFFD}"
                }
            }
        }
        guard let state = parameters["state"], !repeated, Self.equalInConstantTime(state, expectedState) else {
            return .ignore(.wrongState)
        }
        if let error = parameters["error"], !error.isEmpty {
            return .end(.error(error, description: parameters["error_description"]))
        }
        if let code = parameters["code"], !code.isEmpty, code != "\u{FFFD}" {
            return .end(.code(code))
        }
        return .ignore(.incomplete)
    }

    /// Whether this is the user's browser asking for the handoff page (a GET of its path, with the
    /// listener's Host: a page of another site that a DNS name points here gets no Location).
    public func isHandoff(path handoffPath: String, host expectedHost: String) -> Bool {
        let path = target.firstIndex(of: "?").map { String(target[..<$0]) } ?? target
        guard path == handoffPath, method == "GET", let host else { return false }
        return host.lowercased() == expectedHost.lowercased()
    }

    public enum Decision: Equatable, Sendable {
        case end(CallbackOutcome)
        case ignore(IgnoredRequest)
    }

    /// The time taken does not depend on where the texts differ (the state is what
    /// a local attacker would have to guess, with as many tries as the wait lasts).
    static func equalInConstantTime(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8), right = Array(b.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}

/// The browser's way back to a native app (RFC 8252 section 7.3): an HTTP
/// listener on a loopback address only, that serves a few requests at once
/// (a browser opens spare connections; a local client may connect and send
/// nothing), each with a size limit and a deadline, and ends the wait only at a
/// GET of the redirect path with this sign-in's state. Its sockets are closed
/// on exec (a browser started from here never holds them) and when it closes.
///
/// The loopback is shared by every user of the machine, so each connection is
/// taken only from the user's own processes: when it is accepted, the kernel
/// names the owner of the socket at its other end (NETLINK_SOCK_DIAG, else
/// /proc/net/tcp), and a connection of another user (or of no user it can
/// name) gets a page saying the sign-in belongs to someone else, in a pool of
/// its own, so that a flood of them never displaces the user's browser.
///
/// It can also hand the authorization URL to the browser (`offer`): the browser
/// is started with the listener's own `handoffURL`, which carries no secret, and
/// is sent on (303) to the authorization URL, which carries the state, the PKCE
/// challenge and the device token, and so is never put on a command line that
/// other users can read in /proc.
public final class LoopbackRedirectListener {
    /// The redirect URI, with the port the listener holds.
    public let redirectURI: String
    public let port: UInt16
    let redirect: LoopbackRedirect
    /// The uids whose connections are served (the user's own).
    public let owners: Set<UInt32>
    private var listeners: [Int32] = []
    private var connections: [Connection] = []
    /// Other users' connections (and those whose owner is unknown), answered apart.
    private var strangers: [Connection] = []
    /// Where `handoffPath` sends the browser, once offered (nil again once withdrawn).
    private var handoffTarget: String?
    /// The random part of `handoffPath`, given with the URL (`offer`).
    private var handoffKey: String?
    /// Whether the handoff has sent a browser on: it does so once (a second request for it
    /// ends the wait, `handoffReused`).
    private var handoffServed = false
    /// Names a connection's owner, for tests; nil: the kernel (asked for a round's connections at once).
    let ownerOf: ((Int32) -> PeerOwner)?

    /// Limits per connection: the request head's size, and the time to send it.
    public static let maximumHeadBytes = 16_384
    public static let connectionMilliseconds: Int64 = 10_000
    /// At most this many open connections of the user: a new one closes the oldest.
    public static let maximumConnections = 16
    /// At most this many of other users at once, each for at most this long: a new
    /// one beyond them is closed at once, unanswered.
    public static let maximumStrangerConnections = 8
    public static let strangerMilliseconds: Int64 = 2_000
    /// Connections accepted in one round, so that a flood never stops the reading of the
    /// connections already open (the user's browser among them).
    public static let acceptsPerRound = 64
    public static let acceptMillisecondsPerRound: Int64 = 100
    /// The handoff page's path, before its random part.
    public static let handoffPathPrefix = "/devtrust-sign-in/"

    /// Whose a connection is, as the kernel says.
    public enum PeerOwner: Equatable, Sendable {
        case uid(UInt32)
        case unknown
    }

    struct Connection {
        let descriptor: Int32
        var received: [UInt8] = []
        let deadline: Int64
        let owner: PeerOwner
    }

    /// - Parameters:
    ///   - owners: the uids whose connections it serves; the process's real and effective uid by default.
    ///   - ownerOf: how a connection's owner is found (nil: the kernel's answer).
    public init(_ redirect: LoopbackRedirect, owners: Set<UInt32> = [getuid(), geteuid()],
                ownerOf: ((Int32) -> PeerOwner)? = nil) throws(LoopbackListenerError) {
        self.redirect = redirect
        self.owners = owners
        self.ownerOf = ownerOf
        let wanted = redirect.port ?? 0
        switch redirect.host {
        case .ipv4:
            let descriptor = try Self.listen(ipv6: false, port: wanted)
            listeners = [descriptor]
        case .ipv6:
            let descriptor = try Self.listen(ipv6: true, port: wanted)
            listeners = [descriptor]
        case .localhost:
            // A browser may resolve localhost to either address: the same port on both
            // (IPv6 only where the system has it).
            let descriptor = try Self.listen(ipv6: false, port: wanted)
            listeners = [descriptor]
            // IPv6 is skipped only where the system has none; a port taken on ::1 is an error (a
            // browser trying ::1 first would hand the callback to whoever holds it).
            switch Result(catching: { () throws(LoopbackListenerError) -> Int32 in try Self.listen(ipv6: true, port: Self.boundPort(descriptor)) }) {
            case let .success(second):
                listeners.append(second)
            case let .failure(error):
                guard Self.systemHasNoIPv6(error) else {
                    Glibc.close(descriptor)
                    throw error
                }
            }
        }
        port = Self.boundPort(listeners[0])
        redirectURI = redirect.uri(port: port)
    }

    deinit { close() }

    static func systemHasNoIPv6(_ error: LoopbackListenerError) -> Bool {
        guard case let .cannotListen(_, code) = error else { return false }
        return code == EAFNOSUPPORT || code == EADDRNOTAVAIL
    }

    /// Where the kernel is asked: NETLINK_SOCK_DIAG, else /proc/net/tcp(6) (`either`), or one of them.
    public enum OwnerSource: Sendable {
        case either, socketDiagnostics, procNet
    }

    /// The owner of the socket at the other end of an accepted loopback connection.
    public static func kernelOwner(_ descriptor: Int32) -> PeerOwner {
        kernelOwner(descriptor, from: .either)
    }

    public static func kernelOwner(_ descriptor: Int32, from source: OwnerSource) -> PeerOwner {
        var uid: UInt32 = 0
        let found: Int32
        switch source {
        case .either: found = devtrust_loopback_peer_uid(descriptor, &uid)
        case .socketDiagnostics: found = devtrust_loopback_peer_uid_from(descriptor, 0, &uid)
        case .procNet: found = devtrust_loopback_peer_uid_from(descriptor, 1, &uid)
        }
        return found == 0 ? .uid(uid) : .unknown
    }

    /// The owners of connections the kernel has just given (one round's, at most 64): one
    /// question each to NETLINK_SOCK_DIAG, or one read of /proc/net/tcp(6) for all of them.
    static func kernelOwners(_ descriptors: [Int32]) -> [PeerOwner] {
        guard !descriptors.isEmpty else { return [] }
        var results = [Int32](repeating: -1, count: descriptors.count)
        var uids = [UInt32](repeating: 0, count: descriptors.count)
        devtrust_loopback_peer_uids(descriptors, Int32(descriptors.count), &results, &uids)
        return zip(results, uids).map { $0 == 0 ? .uid($1) : .unknown }
    }

    /// The path of `handoffURL`: a fixed prefix and the random key given to `offer`, so that a
    /// page in the user's browser or a user of a forwarded port cannot guess it (a local user
    /// can read it in /proc, and is refused by the owner check).
    public var handoffPath: String? {
        handoffKey.map { Self.handoffPathPrefix + $0 }
    }

    /// What to start the browser with, once `offer` was called: a page of this listener that
    /// sends the user's own browser on to the offered URL, once (and answers other users that
    /// the sign-in is not theirs). It carries nothing secret.
    public var handoffURL: String? {
        handoffPath.map { "http://\(redirect.host.text):\(port)\($0)" }
    }

    /// From now on, `handoffPath` sends the user's browser on to `url` (the authorization URL).
    /// `key`: random, URL-safe (base64url), the last part of the page's path.
    public func offer(_ url: String, key: String) {
        handoffTarget = url
        handoffKey = key
    }

    /// The page sends nobody on any more (the browser could not be started): it answers 404.
    public func withdraw() {
        handoffTarget = nil
    }

    /// Closes every connection and the listening sockets: the port is free again.
    public func close() {
        for connection in connections + strangers { Glibc.close(connection.descriptor) }
        connections = []
        strangers = []
        for descriptor in listeners { Glibc.close(descriptor) }
        listeners = []
    }

    /// Serves requests until a GET of the redirect path carries `state` and a code
    /// or an error; `ignored` hears of every other request; `handedOff` of each time the
    /// user's browser was sent on to the offered URL; `tick` runs at least every 250 ms.
    /// Throws `timedOut` at the deadline (monotonic milliseconds).
    public func waitForCallback(state: String, deadline: Int64, timeoutSeconds: Int, tick: () -> Void = {},
                                interruption: () -> Int32 = { 0 },
                                ignored: (IgnoredRequest) -> Void = { _ in },
                                handedOff: () -> Void = {}) throws(LoopbackListenerError) -> LoopbackCallback {
        var ended: LoopbackCallback?
        try serve(state: state, deadline: deadline, tick: tick, interruption: interruption, ignored: ignored,
                  handedOff: handedOff, until: { ended = $0; return true }, timedOut: .timedOut(redirectURI: redirectURI, seconds: timeoutSeconds))
        return ended!
    }

    /// Serves only the handoff (no redirect is awaited) until the user's browser has been
    /// sent on to the offered URL once, `giveUp` says to stop (checked at least every
    /// 250 ms), or the deadline passes; returns whether the browser came. For a URL handed
    /// to the browser with nothing coming back here (a registration flow's redirection step).
    public func waitForHandoff(deadline: Int64, giveUp: () -> Bool = { false }, interruption: () -> Int32 = { 0 },
                               ignored: (IgnoredRequest) -> Void = { _ in }) throws(LoopbackListenerError) -> Bool {
        var came = false
        do {
            try serve(state: nil, deadline: deadline, tick: {}, interruption: interruption, ignored: ignored,
                      handedOff: { came = true }, until: { _ in true }, stop: { came || giveUp() },
                      timedOut: .timedOut(redirectURI: handoffURL ?? redirectURI, seconds: 0))
        } catch .timedOut {
            return false
        }
        return came
    }

    /// The loop: accept (checking each connection's owner), read request heads, answer,
    /// until a callback ends it (`until` says true), `stop` says so, or the deadline.
    private func serve(state: String?, deadline: Int64, tick: () -> Void, interruption: () -> Int32,
                       ignored: (IgnoredRequest) -> Void, handedOff: () -> Void,
                       until: (LoopbackCallback) -> Bool, stop: () -> Bool = { false },
                       timedOut: LoopbackListenerError) throws(LoopbackListenerError) {
        let expectedHost = "\(redirect.host.text):\(port)"
        while true {
            tick()
            if stop() { return }
            let signal = interruption()
            if signal != 0 { throw .interrupted(signal: signal) }
            let now = Self.now()
            guard now < deadline else { throw timedOut }
            // Clients that overstayed: closed without an answer.
            for connection in connections + strangers where connection.deadline <= now {
                ignored(.tooSlow)
                Glibc.close(connection.descriptor)
            }
            connections.removeAll { $0.deadline <= now }
            strangers.removeAll { $0.deadline <= now }
            var wake = min(deadline, now + 250)
            for connection in connections + strangers { wake = min(wake, connection.deadline) }
            var descriptors = listeners.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                + connections.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
                + strangers.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&descriptors, nfds_t(descriptors.count), Int32(max(0, wake - now)))
            if ready <= 0 { continue }
            // Other users' connections: whatever they ask, the sign-in is not theirs.
            var finished = Set<Int32>()
            for (index, polled) in descriptors.enumerated().dropFirst(listeners.count + connections.count) where polled.revents != 0 {
                let position = index - listeners.count - connections.count
                switch receive(&strangers[position]) {
                case .waiting:
                    continue
                case .closed:
                    finished.insert(strangers[position].descriptor)
                case .head:
                    let stranger = strangers[position]
                    if case let .uid(uid) = stranger.owner { ignored(.otherUser(uid: uid)) } else { ignored(.unknownOwner) }
                    Self.send(stranger.descriptor, Self.response(status: 403, title: LoopbackPage.notYours.title, text: LoopbackPage.notYours.text))
                    finished.insert(stranger.descriptor)
                }
            }
            for descriptor in finished { Glibc.close(descriptor) }
            strangers.removeAll { finished.contains($0.descriptor) }
            finished = []
            // The user's connections (their indices shift when new ones arrive).
            for (index, polled) in descriptors.enumerated().dropFirst(listeners.count).prefix(connections.count) where polled.revents != 0 {
                let position = index - listeners.count
                switch receive(&connections[position]) {
                case .waiting:
                    continue
                case .closed:
                    finished.insert(connections[position].descriptor)
                case let .head(reading):
                    let descriptor = connections[position].descriptor
                    switch decide(reading, host: expectedHost, state: state) {
                    case let .ignore(reason, status):
                        ignored(reason)
                        Self.answer(descriptor, status: status)
                        finished.insert(descriptor)
                    case let .handOff(target):
                        Self.send(descriptor, Self.seeOther(target))
                        finished.insert(descriptor)
                        handoffServed = true
                        handedOff()
                    case .handoffAgain:
                        Self.send(descriptor, Self.response(status: 409, title: LoopbackPage.openedAlready.title, text: LoopbackPage.openedAlready.text))
                        for connection in connections + strangers { Glibc.close(connection.descriptor) }
                        connections = []
                        strangers = []
                        for descriptor in listeners { Glibc.close(descriptor) }
                        listeners = []
                        throw .handoffReused(url: handoffURL ?? redirectURI)
                    case let .end(outcome):
                        let connection = connections.remove(at: position)
                        for other in connections + strangers where !finished.contains(other.descriptor) { Glibc.close(other.descriptor) }
                        for descriptor in finished { Glibc.close(descriptor) }
                        connections = []
                        strangers = []
                        // The listening sockets close now: no other request is taken.
                        for descriptor in listeners { Glibc.close(descriptor) }
                        listeners = []
                        if until(LoopbackCallback(outcome: outcome, connection: connection.descriptor)) { return }
                    }
                }
            }
            for descriptor in finished { Glibc.close(descriptor) }
            connections.removeAll { finished.contains($0.descriptor) }
            for polled in descriptors.prefix(listeners.count) where polled.revents != 0 {
                accept(from: polled.fd)
            }
        }
    }

    enum Received {
        case waiting, closed
        case head(LoopbackRequest.Reading)
    }

    enum Answer {
        case ignore(IgnoredRequest, Int)
        case handOff(String)
        /// The handoff asked for after it sent a browser on.
        case handoffAgain
        case end(CallbackOutcome)
    }

    /// Reads what arrived; a whole head (or one that is too large or malformed) is `head`.
    private func receive(_ connection: inout Connection) -> Received {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(connection.descriptor, &buffer, buffer.count, 0)
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return .waiting }
        if count <= 0 { return .closed }
        connection.received += buffer.prefix(count)
        let reading = LoopbackRequest.read(connection.received, limit: Self.maximumHeadBytes)
        return reading == .incomplete ? .waiting : .head(reading)
    }

    /// What a request of the user's own gets.
    private func decide(_ reading: LoopbackRequest.Reading, host expectedHost: String, state: String?) -> Answer {
        switch reading {
        case .incomplete, .malformed: return .ignore(.malformed, 400)
        case .tooLarge: return .ignore(.tooLarge, 431)
        case let .request(request):
            if let target = handoffTarget, let path = handoffPath, request.isHandoff(path: path, host: expectedHost) {
                return handoffServed ? .handoffAgain : .handOff(target)
            }
            guard let state else { return .ignore(.notFound, 404) }
            switch request.decision(path: redirect.path, host: expectedHost, state: state) {
            case let .end(outcome): return .end(outcome)
            case .ignore(.notFound): return .ignore(.notFound, 404)
            case .ignore(.wrongMethod): return .ignore(.wrongMethod, 405)
            case let .ignore(reason): return .ignore(reason, 400)
            }
        }
    }

    private func accept(from listener: Int32) {
        // Bounded in number and in time, so that reading goes on under a flood; the owners are
        // asked for together, so that a /proc/net/tcp made long costs one read per round.
        let until = Self.now() + Self.acceptMillisecondsPerRound
        var accepted = [Int32]()
        for _ in 0..<Self.acceptsPerRound where Self.now() < until {
            // accept4 is out of Glibc's Swift view. devtrust starts no program while it
            // waits (xdg-open ran before), so no exec sees the socket between the calls.
            let descriptor = Glibc.accept(listener, nil, nil)
            if descriptor < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                break
            }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            accepted.append(descriptor)
        }
        // Asked now, while the other ends are surely open: the kernel names no owner for a closed one.
        let owners = ownerOf.map { accepted.map($0) } ?? Self.kernelOwners(accepted)
        for (descriptor, owner) in zip(accepted, owners) {
            if case let .uid(uid) = owner, self.owners.contains(uid) {
                if connections.count >= Self.maximumConnections {
                    Glibc.close(connections.removeFirst().descriptor)
                }
                connections.append(Connection(descriptor: descriptor, deadline: Self.now() + Self.connectionMilliseconds, owner: owner))
            } else if strangers.count < Self.maximumStrangerConnections {
                strangers.append(Connection(descriptor: descriptor, deadline: Self.now() + Self.strangerMilliseconds, owner: owner))
            } else {
                Glibc.close(descriptor)
            }
        }
    }

    /// Answers the request that ended the wait with a fixed page, and closes its connection.
    public func finish(_ callback: LoopbackCallback, page: LoopbackPage) {
        Self.send(callback.connection, Self.response(status: 200, title: page.title, text: page.text))
        Glibc.close(callback.connection)
    }

    static func answer(_ descriptor: Int32, status: Int) {
        let title: String
        let text: String
        var extra = ""
        switch status {
        case 404: (title, text) = ("Not found", "There is nothing here.")
        case 405: (title, text) = ("Method not allowed", "Only GET is answered here."); extra = "Allow: GET\r\n"
        case 431: (title, text) = ("Request header fields too large", "The request is too large.")
        default: (title, text) = ("Not this sign-in", "This is not the sign-in devtrust is waiting for. If this tab came from devtrust, start the sign-in again from the terminal.")
        }
        send(descriptor, response(status: status, title: title, text: text, extraHeaders: extra))
    }

    /// The handoff: the user's browser sent on to the authorization URL. `no-store`, and no Referer
    /// from here to there (not that this page's URL holds anything).
    static func seeOther(_ location: String) -> [UInt8] {
        response(status: 303, title: "Opening the sign-in page", text: "Opening the sign-in page.", extraHeaders: "Location: \(location)\r\n")
    }

    static func response(status: Int, title: String, text: String, extraHeaders: String = "") -> [UInt8] {
        let reasons = [200: "OK", 303: "See Other", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
                       431: "Request Header Fields Too Large"]
        let body = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>devtrust: \(title)</title></head>"
            + "<body><h1>\(title)</h1><p>\(text)</p></body></html>\n"
        let head = "HTTP/1.1 \(status) \(reasons[status] ?? "Error")\r\n"
            + "Content-Type: text/html; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Content-Security-Policy: default-src 'none'\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
            + "Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\nConnection: close\r\n" + extraHeaders + "\r\n"
        return Array((head + body).utf8)
    }

    /// Writes all of it unless the client stops reading for a second; never raises SIGPIPE.
    static func send(_ descriptor: Int32, _ bytes: [UInt8]) {
        var offset = 0
        let end = now() + 1000
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 { offset += written; continue }
            guard written < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { return }
            let left = end - now()
            guard left > 0 else { return }
            var polled = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            _ = poll(&polled, 1, Int32(left))
        }
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    static func listen(ipv6: Bool, port: UInt16) throws(LoopbackListenerError) -> Int32 {
        let address = ipv6 ? "[::1]:\(port)" : "127.0.0.1:\(port)"
        let descriptor = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw .cannotListen(address: address, code: errno) }
        var one: Int32 = 1
        // A fixed port is free again at once after a previous run (TIME_WAIT); Linux
        // still refuses a second listener on it.
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if ipv6 {
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = port.bigEndian
            socketAddress.sin6_addr = in6addr_loopback
            bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = port.bigEndian
            socketAddress.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
            bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        // A long queue: a flood of other users' connections, each accepted and answered in turn,
        // leaves room for the browser's instead of having its connection refused.
        guard bound == 0, Glibc.listen(descriptor, SOMAXCONN) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw .cannotListen(address: address, code: code)
        }
        return descriptor
    }

    static func boundPort(_ descriptor: Int32) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    /// Monotonic milliseconds (deadlines do not move with the wall clock).
    public static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}
