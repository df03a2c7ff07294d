import DevtrustSignIn
import Foundation
import Glibc
import Testing

/// The loopback redirect of `login --browser` (RFC 8252 section 7.3): which redirect
/// URIs it takes, how it reads a request head, and which requests end the wait.
struct LoopbackRedirectTests {
    @Test func loopbackRedirectURIs() {
        let ephemeral = LoopbackRedirect("http://127.0.0.1/callback")
        #expect(ephemeral?.host == .ipv4 && ephemeral?.port == nil && ephemeral?.path == "/callback")
        #expect(ephemeral?.uri(port: 41234) == "http://127.0.0.1:41234/callback")
        #expect(LoopbackRedirect("http://127.0.0.1:0/callback")?.port == nil)
        let fixed = LoopbackRedirect("http://127.0.0.1:8765/callback")
        #expect(fixed?.port == 8765 && fixed?.uri(port: 8765) == "http://127.0.0.1:8765/callback")
        #expect(LoopbackRedirect("http://[::1]:9000/cb")?.host == .ipv6)
        #expect(LoopbackRedirect("http://[::1]:9000/cb")?.uri(port: 9000) == "http://[::1]:9000/cb")
        #expect(LoopbackRedirect("http://localhost:8085/")?.host == .localhost)
        #expect(LoopbackRedirect("http://127.0.0.1:8765")?.path == "/")
        #expect(LoopbackRedirect("http://127.0.0.1:8765/cb?app=1")?.uri(port: 8765) == "http://127.0.0.1:8765/cb?app=1")
        for refused in ["https://127.0.0.1/callback", "http://app.example/callback", "http://127.0.0.2/callback", "http://evil@127.0.0.1/cb",
                        "http://127.0.0.1:99999/cb", "http://127.0.0.1:-1/cb", "http://127.0.0.1:80x/cb", "http://127.0.0.1/cb#frag",
                        "http://127.0.0.1.evil.example/cb", "http://[::1]x/cb", "http://127.0.0.1/cb\u{1B}[2J", "127.0.0.1:8765/callback",
                        "file:///etc/passwd"] {
            #expect(LoopbackRedirect(refused) == nil, "\(refused)")
        }
    }

    static func head(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func requestHeadsAreReadStrictly() {
        let limit = 16_384
        #expect(LoopbackRequest.read(Self.head("GET /callback?a=1 HTTP/1.1\r\nHost: 127.0.0.1:5000\r\n\r\n"), limit: limit)
                == .request(LoopbackRequest(method: "GET", target: "/callback?a=1", host: "127.0.0.1:5000")))
        #expect(LoopbackRequest.read(Self.head("\r\nGET / HTTP/1.0\nHost:  h:1 \n\n"), limit: limit)
                == .request(LoopbackRequest(method: "GET", target: "/", host: "h:1")))
        #expect(LoopbackRequest.read(Self.head("GET /callback HTTP/1.1\r\nHost: a"), limit: limit) == .incomplete)
        #expect(LoopbackRequest.read(Self.head("GET /callback HTTP/1.1\r\nX: " + String(repeating: "a", count: limit)), limit: limit) == .tooLarge)
        #expect(LoopbackRequest.read(Self.head("GET /callback HTTP/1.1\r\nX: " + String(repeating: "a", count: limit) + "\r\n\r\n"), limit: limit) == .tooLarge)
        for malformed in ["GET  /callback HTTP/1.1\r\n\r\n", "GET http://127.0.0.1/callback HTTP/1.1\r\n\r\n", "get /callback HTTP/1.1\r\n\r\n",
                          "GET /callback HTTP/2\r\n\r\n", "GET /callback\r\n\r\n", "GET /callback HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                          "GET /callback HTTP/1.1\r\nno colon\r\n\r\n", "GET /callback HTTP/1.1\r\nHost : a\r\n\r\n"] {
            #expect(LoopbackRequest.read(Self.head(malformed), limit: limit) == .malformed, "\(malformed)")
        }
        #expect(LoopbackRequest.read([0x47, 0x45, 0x54, 0x20, 0x2F, 0xFF, 0x20, 0x0D, 0x0A, 0x0D, 0x0A], limit: limit) == .malformed)
    }

    static func decide(_ target: String, method: String = "GET", host: String? = "127.0.0.1:5000") -> LoopbackRequest.Decision {
        LoopbackRequest(method: method, target: target, host: host).decision(path: "/callback", host: "127.0.0.1:5000", state: "s3cr3t-state")
    }

    @Test func onlyAGetOfTheRedirectPathWithThisStateEndsTheWait() {
        #expect(Self.decide("/callback?code=c0de&state=s3cr3t-state") == .end(.code("c0de")))
        #expect(Self.decide("/callback?state=s3cr3t-state&code=a%2Bb+c") == .end(.code("a+b c")))
        #expect(Self.decide("/callback?error=access_denied&error_description=no%1B%5B2J&state=s3cr3t-state")
                == .end(.error("access_denied", description: "no\u{1B}[2J")))
        #expect(Self.decide("/favicon.ico") == .ignore(.notFound))
        #expect(Self.decide("/callback/../callback?code=c&state=s3cr3t-state") == .ignore(.notFound))
        #expect(Self.decide("/Callback?code=c&state=s3cr3t-state") == .ignore(.notFound))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", method: "POST") == .ignore(.wrongMethod))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", method: "HEAD") == .ignore(.wrongMethod))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", host: "evil.example:5000") == .ignore(.wrongHost))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", host: nil) == .ignore(.wrongHost))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-statE") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-stat") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c&state=") == .ignore(.wrongState))
        // A repeated parameter is not read either way.
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state&state=other") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c&code=d&state=s3cr3t-state") == .ignore(.wrongState))
        #expect(Self.decide("/callback?state=s3cr3t-state") == .ignore(.incomplete))
        #expect(Self.decide("/callback?state=s3cr3t-state&code=") == .ignore(.incomplete))
        #expect(Self.decide("/callback?state=s3cr3t-state&code=%FF") == .ignore(.incomplete))
    }
}

/// The listener's owner check and handoff, in process: a client thread talks to a real
/// loopback listener whose idea of each connection's owner is given (`ownerOf`), so that
/// another user's connection is played without a second user. (The kernel's answer itself:
/// `LoopbackPeerTests`; with real users: LocalUsersSignInTests.)
struct LoopbackOwnerTests {
    /// What the client thread got back: each answer's status line and body, in order.
    final class Answers: @unchecked Sendable {
        private let lock = NSLock()
        private var texts: [String] = []
        private var isDone = false
        func add(_ text: String) { lock.lock(); texts.append(text); lock.unlock() }
        func finish() { lock.lock(); isDone = true; lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return texts }
        var done: Bool { lock.lock(); defer { lock.unlock() }; return isDone }
    }

    static func connect(_ port: UInt16) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        return descriptor
    }

    /// Sends `target` as a GET on a new connection and reads the answer to its end.
    static func get(_ port: UInt16, _ target: String, on descriptor: Int32? = nil) -> String {
        let descriptor = descriptor ?? connect(port)
        defer { close(descriptor) }
        let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            answer += buffer.prefix(count)
        }
        return String(decoding: answer, as: UTF8.self)
    }

    static func listener(ownerOf: @escaping (Int32) -> LoopbackRedirectListener.PeerOwner) throws -> LoopbackRedirectListener {
        try LoopbackRedirectListener(LoopbackRedirect("http://127.0.0.1/callback")!, owners: [1000], ownerOf: ownerOf)
    }

    @Test func theUsersBrowserIsSentOnToTheOfferedURL() throws {
        let listener = try Self.listener { _ in .uid(1000) }
        defer { listener.close() }
        #expect(listener.handoffURL == nil)
        let target = "https://idp.example/oauth2/authorize?state=s3cr3t&device_token=t0ken"
        listener.offer(target, key: "k3y")
        #expect(listener.handoffURL == "http://127.0.0.1:\(listener.port)/devtrust-sign-in/k3y")
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            answers.add(Self.get(port, "/devtrust-sign-in/k3y"))
            answers.finish()
        }
        let came = try listener.waitForHandoff(deadline: LoopbackRedirectListener.now() + 30_000)
        while !answers.done { usleep(1000) }
        #expect(came)
        let answer = try #require(answers.all.first)
        #expect(answer.hasPrefix("HTTP/1.1 303 See Other\r\n") && answer.contains("\r\nLocation: \(target)\r\n")
                && answer.contains("Cache-Control: no-store") && answer.contains("Referrer-Policy: no-referrer"), "\(answer)")
    }

    /// Whatever another user's connection asks (the handoff page, the callback with the right
    /// state), it gets the page that says the sign-in is someone else's, and the wait goes on.
    @Test func anotherUsersConnectionGetsNothingButTheRefusal() throws {
        let listener = try Self.listener { _ in .uid(1001) }
        defer { listener.close() }
        listener.offer("https://idp.example/oauth2/authorize?state=s3cr3t", key: "k3y")
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            answers.add(Self.get(port, "/devtrust-sign-in/k3y"))
            answers.add(Self.get(port, "/callback?code=c0de&state=s3cr3t"))
            answers.finish()
        }
        var ignored = [IgnoredRequest]()
        // The wait is ended (as by a signal) once the client has both answers.
        #expect(throws: LoopbackListenerError.interrupted(signal: SIGUSR1)) {
            _ = try listener.waitForCallback(state: "s3cr3t", deadline: LoopbackRedirectListener.now() + 30_000, timeoutSeconds: 30,
                                             interruption: { answers.done ? SIGUSR1 : 0 }, ignored: { ignored.append($0) },
                                             handedOff: { Issue.record("another user was sent on") })
        }
        #expect(answers.all.count == 2)
        for answer in answers.all {
            #expect(answer.hasPrefix("HTTP/1.1 403 Forbidden\r\n") && answer.contains("This sign-in belongs to someone else")
                    && !answer.contains("Location") && !answer.contains("s3cr3t"), "\(answer)")
        }
        #expect(ignored == [.otherUser(uid: 1001), .otherUser(uid: 1001)])
    }

    /// A connection whose owner the kernel cannot name is refused as another user's.
    @Test func aConnectionOfNoKnownOwnerIsRefused() throws {
        let listener = try Self.listener { _ in .unknown }
        defer { listener.close() }
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            answers.add(Self.get(port, "/callback?code=c0de&state=s3cr3t"))
            answers.finish()
        }
        var ignored = [IgnoredRequest]()
        #expect(throws: LoopbackListenerError.interrupted(signal: SIGUSR1)) {
            _ = try listener.waitForCallback(state: "s3cr3t", deadline: LoopbackRedirectListener.now() + 30_000, timeoutSeconds: 30,
                                             interruption: { answers.done ? SIGUSR1 : 0 }, ignored: { ignored.append($0) })
        }
        #expect(answers.all.first?.hasPrefix("HTTP/1.1 403 Forbidden\r\n") == true && ignored == [.unknownOwner])
    }

    /// 40 idle connections of another user (more than both pools hold) do not displace the
    /// user's own connection, opened before them and sending its callback after them.
    @Test func otherUsersIdleConnectionsNeverDisplaceTheUsers() throws {
        // The listener is told the first connection is the user's, and every later one another user's.
        let accepted = Answers()
        let listener = try Self.listener { _ in
            accepted.add("accepted")
            return accepted.all.count == 1 ? .uid(1000) : .uid(1001)
        }
        defer { listener.close() }
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            let own = Self.connect(port)
            while accepted.all.count < 1 { usleep(1000) }
            let idle = (0..<40).map { _ in Self.connect(port) }
            while accepted.all.count < 41 { usleep(1000) }
            answers.add(Self.get(port, "/callback?code=c0de&state=s3cr3t", on: own))
            idle.forEach { close($0) }
            answers.finish()
        }
        let callback = try listener.waitForCallback(state: "s3cr3t", deadline: LoopbackRedirectListener.now() + 30_000, timeoutSeconds: 30)
        #expect(callback.outcome == .code("c0de"))
        listener.finish(callback, page: .signedIn)
        while !answers.done { usleep(1000) }
        #expect(answers.all.first?.hasPrefix("HTTP/1.1 200 OK\r\n") == true, "\(answers.all)")
    }
}

/// The kernel's answer to "whose is the other end of this loopback connection", from
/// NETLINK_SOCK_DIAG and from /proc/net/tcp(6): this process's own connection, one made by
/// a program run as nobody (setpriv), over IPv4, IPv6 and an IPv4-mapped IPv6 socket, and
/// one whose other end closed before it was asked (no owner: the kernel says uid 0 for it).
@Suite(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))) struct LoopbackPeerTests {
    /// A listening socket on the loopback (IPv6 when asked), its port.
    static func listen(ipv6: Bool) -> (Int32, UInt16) {
        let descriptor = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        if ipv6 {
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_addr = in6addr_loopback
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        _ = Glibc.listen(descriptor, 8)
        var storage = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        return (descriptor, UInt16(bigEndian: storage.sin6_port))
    }

    /// Starts python3 as nobody, connecting to `host`:`port` (through an IPv6 socket when
    /// `family6`), and keeping the connection open until its stdin closes unless `closeAtOnce`.
    static func nobodyConnects(_ host: String, _ port: UInt16, family6: Bool, closeAtOnce: Bool) throws -> Process {
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_INET6 if \(family6 ? "True" : "False") else socket.AF_INET)
            s.connect(("\(host)", \(port)))
            if not \(closeAtOnce ? "True" : "False"): sys.stdin.read()
            s.close()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script]
        process.standardInput = Pipe()
        try process.run()
        return process
    }

    static let sources: [LoopbackRedirectListener.OwnerSource] = [.either, .socketDiagnostics, .procNet]

    @Test(arguments: [("127.0.0.1", false, false), ("::1", true, true), ("::ffff:127.0.0.1", false, true)])
    func theKernelNamesTheOwnerOfTheOtherEnd(host: String, listen6: Bool, connect6: Bool) throws {
        let (listener, port) = Self.listen(ipv6: listen6)
        defer { close(listener) }
        // Another user's connection.
        let other = try Self.nobodyConnects(host, port, family6: connect6, closeAtOnce: false)
        let accepted = accept(listener, nil, nil)
        for source in Self.sources {
            #expect(LoopbackRedirectListener.kernelOwner(accepted, from: source) == .uid(65534), "\(source)")
        }
        try (other.standardInput as? Pipe)?.fileHandleForWriting.close()
        other.waitUntilExit()
        close(accepted)
        // This process's own.
        let own = socket(connect6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(own) }
        if connect6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            _ = inet_pton(AF_INET6, host, &address.sin6_addr)
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(own, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(own, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        let mine = accept(listener, nil, nil)
        defer { close(mine) }
        for source in Self.sources {
            #expect(LoopbackRedirectListener.kernelOwner(mine, from: source) == .uid(getuid()), "\(source)")
        }
    }

    /// An end closed before the question has no owner: refused, never taken for root's.
    @Test func anEndThatClosedHasNoOwner() throws {
        let (listener, port) = Self.listen(ipv6: false)
        defer { close(listener) }
        let other = try Self.nobodyConnects("127.0.0.1", port, family6: false, closeAtOnce: true)
        other.waitUntilExit()
        let accepted = accept(listener, nil, nil)
        defer { close(accepted) }
        for source in Self.sources {
            #expect(LoopbackRedirectListener.kernelOwner(accepted, from: source) == .unknown, "\(source)")
        }
    }
}

/// What the issue 25 review found the first tests let through: the handoff's Host check,
/// the bound on accepts per round, and a second request for the handoff page.
struct LoopbackHandoffLimitTests {
    typealias Answers = LoopbackOwnerTests.Answers

    /// A page of another site that DNS points at 127.0.0.1 (rebinding) gets no Location.
    @Test func theHandoffNeedsTheListenersHost() throws {
        let listener = try LoopbackOwnerTests.listener { _ in .uid(1000) }
        defer { listener.close() }
        listener.offer("https://idp.example/oauth2/authorize?state=s3cr3t", key: "k3y")
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            let descriptor = LoopbackOwnerTests.connect(port)
            defer { close(descriptor) }
            let request = Array("GET /devtrust-sign-in/k3y HTTP/1.1\r\nHost: evil.example:\(port)\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            var answer = [UInt8]()
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count <= 0 { break }
                answer += buffer.prefix(count)
            }
            answers.add(String(decoding: answer, as: UTF8.self))
            answers.finish()
        }
        let came = try listener.waitForHandoff(deadline: LoopbackRedirectListener.now() + 30_000, giveUp: { answers.done })
        #expect(!came)
        let answer = try #require(answers.all.first)
        #expect(answer.hasPrefix("HTTP/1.1 404 ") && !answer.contains("Location") && !answer.contains("s3cr3t"), "\(answer)")
    }

    /// The handoff sends one browser on. Asked for again (a forwarder of the user's that other
    /// users reach, say `ssh -D`, may have given it to someone else first), it ends the wait:
    /// the second asker gets no Location, and the sign-in stops.
    @Test func aSecondRequestForTheHandoffEndsTheSignIn() throws {
        let listener = try LoopbackOwnerTests.listener { _ in .uid(1000) }
        defer { listener.close() }
        listener.offer("https://idp.example/oauth2/authorize?state=s3cr3t", key: "k3y")
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            answers.add(LoopbackOwnerTests.get(port, "/devtrust-sign-in/k3y"))
            answers.add(LoopbackOwnerTests.get(port, "/devtrust-sign-in/k3y"))
            answers.finish()
        }
        var handedOff = 0
        #expect(throws: LoopbackListenerError.handoffReused(url: listener.handoffURL!)) {
            _ = try listener.waitForCallback(state: "s3cr3t", deadline: LoopbackRedirectListener.now() + 30_000, timeoutSeconds: 30,
                                             handedOff: { handedOff += 1 })
        }
        while !answers.done { usleep(1000) }
        #expect(handedOff == 1)
        #expect(answers.all.first?.hasPrefix("HTTP/1.1 303 ") == true)
        let second = try #require(answers.all.last)
        #expect(second.hasPrefix("HTTP/1.1 409 Conflict\r\n") && second.contains("This sign-in page was already opened")
                && !second.contains("Location") && !second.contains("s3cr3t"), "\(second)")
        #expect(LoopbackListenerError.handoffReused(url: listener.handoffURL!).description.contains("ssh -D"))
    }

    /// Nothing is sent on before a URL is offered, after it is withdrawn (xdg-open failed: no
    /// browser of devtrust's is coming), or for a path without the page's random key (a page
    /// in the browser or a user of a forwarded port guessing it).
    @Test func thePageSendsNobodyOnUnlessOfferedUnderItsKey() throws {
        let listener = try LoopbackOwnerTests.listener { _ in .uid(1000) }
        defer { listener.close() }
        let answers = Answers()
        let port = listener.port
        let step = Answers()
        DispatchQueue.global().async {
            answers.add(LoopbackOwnerTests.get(port, "/devtrust-sign-in/"))
            step.add("before offer")
            while step.all.count < 2 { usleep(1000) }
            answers.add(LoopbackOwnerTests.get(port, "/devtrust-sign-in/guess"))
            answers.add(LoopbackOwnerTests.get(port, "/devtrust-sign-in"))
            step.add("wrong keys")
            while step.all.count < 4 { usleep(1000) }
            answers.add(LoopbackOwnerTests.get(port, "/devtrust-sign-in/k3y"))
            answers.finish()
        }
        let served = try listener.waitForHandoff(deadline: LoopbackRedirectListener.now() + 30_000, giveUp: {
            if step.all.count == 1 {
                listener.offer("https://idp.example/oauth2/authorize?state=s3cr3t", key: "k3y")
                step.add("offered")
            } else if step.all.count == 3 {
                listener.withdraw()
                step.add("withdrawn")
            }
            return answers.done
        })
        #expect(!served)
        #expect(answers.all.count == 4 && answers.all.allSatisfy { $0.hasPrefix("HTTP/1.1 404 ") && !$0.contains("s3cr3t") }, "\(answers.all)")
    }

    /// Other users' idle connections: at most 8 are kept (each until its 2 s are up, then
    /// closed as too slow); those beyond are closed at once.
    @Test func otherUsersConnectionsAreKeptEightAtATime() throws {
        let listener = try LoopbackOwnerTests.listener { _ in .uid(1001) }
        defer { listener.close() }
        let answers = Answers()
        let port = listener.port
        DispatchQueue.global().async {
            let idle = (0..<20).map { _ in LoopbackOwnerTests.connect(port) }
            // Each ends (EOF) when the listener closes it.
            for descriptor in idle {
                var byte: UInt8 = 0
                _ = recv(descriptor, &byte, 1, 0)
                close(descriptor)
            }
            answers.finish()
        }
        var tooSlow = 0
        #expect(throws: LoopbackListenerError.interrupted(signal: SIGUSR1)) {
            _ = try listener.waitForCallback(state: "s3cr3t", deadline: LoopbackRedirectListener.now() + 60_000, timeoutSeconds: 60,
                                             interruption: { answers.done ? SIGUSR1 : 0 },
                                             ignored: { if $0 == .tooSlow { tooSlow += 1 } })
        }
        #expect(tooSlow == LoopbackRedirectListener.maximumStrangerConnections, "\(tooSlow) of 20 were kept until their time was up")
    }

    /// Accepting is bounded per round: a flood that never lets up (here, each accepted
    /// connection of another user brings another) does not keep the user's own request, sent
    /// on a connection already open, from being read.
    @Test func aFloodThatNeverEndsDoesNotStopTheReading() throws {
        let accepted = Answers()
        var listener: LoopbackRedirectListener!
        var flooders = [Int32]()
        listener = try LoopbackRedirectListener(LoopbackRedirect("http://127.0.0.1/callback")!, owners: [1000]) { _ in
            accepted.add("accepted")
            if accepted.all.count == 1 { return .uid(1000) }
            // Each stranger brings another, up to 2000: the accept queue does not empty before then.
            if accepted.all.count < 2000 { flooders.append(LoopbackOwnerTests.connect(listener.port)) }
            return .uid(1001)
        }
        defer {
            listener.close()
            flooders.forEach { close($0) }
        }
        let answers = Answers()
        let listenerPort = listener.port
        DispatchQueue.global().async {
            let own = LoopbackOwnerTests.connect(listenerPort)
            while accepted.all.isEmpty { usleep(1000) }
            // The flood begins, then the user's request goes out on the connection open before it.
            let first = LoopbackOwnerTests.connect(listenerPort)
            while accepted.all.count < 100 { usleep(1000) }
            answers.add(LoopbackOwnerTests.get(listenerPort, "/callback?code=c0de&state=s3cr3t", on: own))
            close(first)
            answers.finish()
        }
        let callback = try listener.waitForCallback(state: "s3cr3t", deadline: LoopbackRedirectListener.now() + 60_000, timeoutSeconds: 60)
        // Read while the flood went on, not after it was all accepted.
        let acceptedBefore = accepted.all.count
        #expect(callback.outcome == .code("c0de"))
        listener.finish(callback, page: .signedIn)
        while !answers.done { usleep(1000) }
        #expect(answers.all.first?.hasPrefix("HTTP/1.1 200 OK\r\n") == true, "\(answers.all)")
        #expect(acceptedBefore < 2000, "the user's request was read only once the flood was over (\(acceptedBefore) connections accepted)")
    }
}
