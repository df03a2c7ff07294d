// Each way a Swift test could wait, for the fast tier guard's self-test (scripts/run-tests.py):
// run under the guard, every mode but "plain" must be refused. Built by `make check`.
import Dispatch
import Foundation

let mode = CommandLine.arguments.dropFirst().first ?? "plain"
let done = DispatchSemaphore(value: 0)
switch mode {
case "task-sleep":
    Task { try? await Task.sleep(nanoseconds: 10_000_000); done.signal() }
    done.wait()
case "semaphore-timeout":
    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + 0.01)
case "run-loop":
    RunLoop.current.run(until: Date().addingTimeInterval(0.01))
case "async-after":
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { done.signal() }
    done.wait()
case "thread-sleep":
    Thread.sleep(forTimeInterval: 0.01)
case "task-sleep-tolerance":
    // With a tolerance the runtime arms a dispatch timer source rather than dispatch_after.
    Task { try? await Task.sleep(until: .now + .milliseconds(10), tolerance: .milliseconds(1), clock: .continuous); done.signal() }
    done.wait()
case "group-timeout":
    let group = DispatchGroup()
    group.enter()
    _ = group.wait(timeout: .now() + 0.01)
case "work-item-timeout":
    let item = DispatchWorkItem {}
    _ = item.wait(timeout: .now() + 0.01)
case "timer-source":
    let timer = DispatchSource.makeTimerSource()
    timer.setEventHandler { done.signal() }
    timer.schedule(deadline: .now() + 0.01)
    timer.resume()
    done.wait()
case "condition-timeout":
    let condition = NSCondition()
    condition.lock()
    _ = condition.wait(until: Date().addingTimeInterval(0.01))
default:
    // What the fast tier's tests do: work handed to a task, waited for without a timeout.
    Task { done.signal() }
    done.wait()
}
print("ran \(mode)")
