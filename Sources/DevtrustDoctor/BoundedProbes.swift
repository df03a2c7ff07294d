import DevtrustEncoding
import Glibc

/// Work that waits on something outside devtrust and may never end (a TCTI
/// that accepts a connection and never answers, whose TSS reads block with no
/// timeout; a server): run in a child process (fork) that is killed at its
/// deadline, its result sent back as JSON through a pipe. A child that crashes
/// takes nothing else down. Several jobs may run at once.
///
/// Forking is only safe in a single-threaded process, as devtrust is: in-process
/// tests (a multi-threaded test runner) run the jobs inline, without deadlines
/// (`CommandEnvironment.isolatesProbes`).
package struct BoundedProbes {
    package let isolated: Bool

    package init(isolated: Bool) {
        self.isolated = isolated
    }

    package struct Job {
        /// How long it may take.
        package let seconds: Double
        package let work: () -> JSONValue
    }

    package enum Outcome {
        case finished(JSONValue)
        /// Killed at its deadline.
        case timedOut(seconds: Double)
        /// Not started: the budget of the whole run was spent.
        case notStarted(budget: Double)
        /// The child ended without a result (a crash, the signal or status).
        case failed(String)

        package var value: JSONValue? {
            if case let .finished(value) = self { return value }
            return nil
        }
    }

    package func run(seconds: Double, _ work: @escaping () -> JSONValue) -> Outcome {
        run([Job(seconds: seconds, work: work)])[0]
    }

    /// Runs `jobs`, at most `parallel` at once; one that is not started within `budget`
    /// seconds of the first is not started at all. The outcomes are in the jobs' order.
    package func run(_ jobs: [Job], parallel: Int = 1, budget: Double? = nil) -> [Outcome] {
        guard isolated else { return jobs.map { .finished($0.work()) } }
        var outcomes = [Outcome?](repeating: nil, count: jobs.count)
        var running = [Child]()
        var next = 0
        let started = Self.monotonicSeconds()
        while next < jobs.count || !running.isEmpty {
            while running.count < max(parallel, 1) && next < jobs.count {
                let index = next
                next += 1
                if let budget, Self.monotonicSeconds() - started >= budget {
                    outcomes[index] = .notStarted(budget: budget)
                    continue
                }
                if let child = Child.start(index: index, job: jobs[index]) {
                    running.append(child)
                } else {
                    // No fork (out of processes): the work runs here, unbounded, rather than not at all.
                    outcomes[index] = .finished(jobs[index].work())
                }
            }
            guard !running.isEmpty else { continue }
            let now = Self.monotonicSeconds()
            let wait = max(0, (running.map(\.deadline).min() ?? now) - now)
            var descriptors = running.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let polled = poll(&descriptors, nfds_t(descriptors.count), Int32(min(wait, 1) * 1000) + 1)
            if polled < 0 && errno != EINTR { break }
            var still = [Child]()
            for (child, descriptor) in zip(running, descriptors) {
                if descriptor.revents != 0, child.readAvailable() {
                    outcomes[child.index] = child.finish()
                } else if Self.monotonicSeconds() >= child.deadline {
                    outcomes[child.index] = child.kill(seconds: jobs[child.index].seconds)
                } else {
                    still.append(child)
                }
            }
            running = still
        }
        return outcomes.map { $0 ?? .failed("not run") }
    }

    package static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// One job's process, and what it has written so far.
    private final class Child {
        package let index: Int
        package let pid: pid_t
        package let descriptor: Int32
        package let deadline: Double
        package var output = [UInt8]()

        private init(index: Int, pid: pid_t, descriptor: Int32, deadline: Double) {
            self.index = index
            self.pid = pid
            self.descriptor = descriptor
            self.deadline = deadline
        }

        package static func start(index: Int, job: Job) -> Child? {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { return nil }
            let deadline = BoundedProbes.monotonicSeconds() + job.seconds
            let pid = fork()
            if pid == 0 {
                close(ends[0])
                let bytes = JSONWriter.bytes(job.work())
                var written = 0
                while written < bytes.count {
                    let count = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress! + written, $0.count - written) }
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    written += count
                }
                // No atexit handlers, no stdio flushing: the parent owns the streams.
                _exit(0)
            }
            close(ends[1])
            guard pid > 0 else {
                close(ends[0])
                return nil
            }
            return Child(index: index, pid: pid, descriptor: ends[0], deadline: deadline)
        }

        /// Reads what is there; true at the end of the output.
        package func readAvailable() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 16_384)
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 { return errno != EINTR && errno != EAGAIN }
            if count == 0 { return true }
            output += chunk.prefix(count)
            return false
        }

        package func finish() -> Outcome {
            close(descriptor)
            let status = Self.reap(pid)
            if let value = try? JSONParser.parse(output) { return .finished(value) }
            return .failed(status)
        }

        package func kill(seconds: Double) -> Outcome {
            Glibc.kill(pid, SIGKILL)
            close(descriptor)
            _ = Self.reap(pid)
            return .timedOut(seconds: seconds)
        }

        /// Waits for the process; how it ended, in words.
        private static func reap(_ pid: pid_t) -> String {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let signal = status & 0x7F
            if signal != 0 { return "it was killed by signal \(signal)" }
            return "it exited with status \((status >> 8) & 0xFF) without a result"
        }
    }
}
