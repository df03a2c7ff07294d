import CAgentSocket
import Glibc
import Synchronization

/// What serves the agent's requests: made on the worker thread and used there only, one request at
/// a time (one machine key, one TPM connection), so that it needs no lock of its own.
public protocol AgentRequestHandler: AnyObject {
    /// The reply to `request`, given who asked.
    func handle(_ peer: AgentPeer, _ request: AgentRequest) -> AgentReply
    /// The agent stops: let go of what is held (the machine key, loaded in the TPM).
    func stop()
}

/// The agent's worker thread, which serves requests one at a time while the loop goes on accepting,
/// reading, refusing and expiring connections (a TPM takes 200-600 ms to sign). The loop gives it one
/// request at a time and takes its reply back: they share only that, and the lines the worker has
/// to say (the audit), which the loop writes; each wakes the other with a byte on a pipe.
final class AgentWorker: Sendable {
    /// A request given to the worker: `id` names its connection in the loop.
    struct Job: Sendable {
        let id: UInt64
        let peer: AgentPeer
        let request: AgentRequest
    }

    /// What the worker made for the loop since the loop last looked.
    struct Output {
        var replies: [(id: UInt64, reply: AgentReply)] = []
        var lines: [String] = []
    }

    private struct Shared {
        var job: Job?
        var stopping = false
        var output = Output()
    }

    /// What makes the handler, on the worker thread; `say` takes the lines it has to say.
    typealias MakeHandler = @Sendable (_ say: @escaping @Sendable (String) -> Void) -> any AgentRequestHandler

    private let shared = Mutex(Shared())
    /// The loop wakes the worker here (read end: the worker's).
    private let toWorker: (read: Int32, write: Int32)
    /// The worker wakes the loop here; the loop polls `readable`.
    private let toLoop: (read: Int32, write: Int32)
    private let thread = Mutex<pthread_t?>(nil)

    /// The descriptor that becomes readable when the worker has something for the loop.
    var readable: Int32 { toLoop.read }

    private init(toWorker: (Int32, Int32), toLoop: (Int32, Int32)) {
        self.toWorker = toWorker
        self.toLoop = toLoop
    }

    /// Starts the worker thread, which makes its handler with `makeHandler` before its first request.
    static func start(_ makeHandler: @escaping MakeHandler) throws(AgentListenerError) -> AgentWorker {
        var toWorker: [Int32] = [-1, -1], toLoop: [Int32] = [-1, -1]
        guard devtrust_agent_wake_pipe(&toWorker) == 0 else { throw .io(path: "a pipe", operation: "make", errno: errno) }
        guard devtrust_agent_wake_pipe(&toLoop) == 0 else {
            let code = errno
            toWorker.forEach { _ = close($0) }
            throw .io(path: "a pipe", operation: "make", errno: code)
        }
        let worker = AgentWorker(toWorker: (toWorker[0], toWorker[1]), toLoop: (toLoop[0], toLoop[1]))
        let body = ThreadBody { worker.run(makeHandler) }
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, Unmanaged.passRetained(body).toOpaque())
        guard created == 0 else {
            Unmanaged.passUnretained(body).release()
            worker.closePipes()
            throw .io(path: "the worker thread", operation: "start", errno: created)
        }
        worker.thread.withLock { $0 = thread }
        return worker
    }

    /// Gives the worker `job` (it is idle: the loop gives one at a time).
    func give(_ job: Job) {
        shared.withLock { $0.job = job }
        Self.wake(toWorker.write)
    }

    /// What the worker made since the last call.
    func take() -> Output {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(toLoop.read, &bytes, bytes.count) > 0 {}
        return shared.withLock { shared in
            defer { shared.output = Output() }
            return shared.output
        }
    }

    /// Has the worker finish the request it serves, stop its handler (which lets the TPM go) and
    /// end; waits for it. What it said last is for `take()`.
    func stop() {
        shared.withLock { $0.stopping = true }
        Self.wake(toWorker.write)
        if let thread = thread.withLock({ $0 }) { pthread_join(thread, nil) }
    }

    /// After `stop()` and the last `take()`.
    func closePipes() {
        for descriptor in [toWorker.read, toWorker.write, toLoop.read, toLoop.write] { close(descriptor) }
    }

    // MARK: On the worker thread

    private func run(_ makeHandler: MakeHandler) {
        let handler = makeHandler { [self] line in
            shared.withLock { $0.output.lines.append(line) }
            Self.wake(toLoop.write)
        }
        while let job = next() {
            let reply = handler.handle(job.peer, job.request)
            shared.withLock { $0.output.replies.append((job.id, reply)) }
            Self.wake(toLoop.write)
        }
        handler.stop()
        Self.wake(toLoop.write)
    }

    /// The next job, waiting for it; nil when the worker is to stop.
    private func next() -> Job? {
        while true {
            let (job, stopping) = shared.withLock { shared in
                defer { shared.job = nil }
                return (shared.job, shared.stopping)
            }
            if let job { return job }
            if stopping { return nil }
            var descriptor = pollfd(fd: toWorker.read, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, -1)
            var bytes = [UInt8](repeating: 0, count: 64)
            while read(toWorker.read, &bytes, bytes.count) > 0 {}
        }
    }

    /// One byte: the other side polls for it (a full pipe is readable already).
    private static func wake(_ descriptor: Int32) {
        var byte: UInt8 = 1
        _ = write(descriptor, &byte, 1)
    }
}

/// The worker thread's start, handed through pthread_create.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void

    init(_ run: @escaping @Sendable () -> Void) {
        self.run = run
    }
}
