import DevtrustTestSupport
import Foundation
import Testing

/// `scripts/run-tests.py`, which `make test` and `make check` run, against a test binary and a
/// `swift` that a test writes: a copy of the script in a scratch repository (it finds the
/// repository from its own place), so that its durations file and logs are the test's own.
/// The fake test binary answers each `--filter` as the test's plan says and records what it
/// was asked to run.
@Suite struct TestRunnerTests {
    /// A scratch repository with the script, a `swift` that lists `listed`, and a test binary
    /// that answers each suite as `plan` says: "pass", "fail", "crash", or "pass:N" (N tests ran).
    struct Runner {
        let directory = TemporaryDirectory("run-tests")

        init(listed: [String], plan: [String: String], fastTier: [String] = []) throws {
            let script = try #require(FileManager.default.contents(atPath: Repository.path("scripts/run-tests.py")))
            directory.write("scripts/run-tests.py", Array(script), mode: 0o755)
            directory.write("Tests/fast-tier.txt", (["# the fast tier"] + fastTier).joined(separator: "\n") + "\n")
            directory.write("listed.txt", listed.joined(separator: "\n") + "\n")
            let planLines = plan.map { "\($0.key)\t\($0.value)" }.sorted()
            directory.write("plan.tsv", planLines.joined(separator: "\n") + "\n")
            directory.write("swift", """
                #!/bin/sh
                case "$1 $2" in
                  "test list") cat '\(directory.path)/listed.txt' ;;
                  "build --show-bin-path") echo '\(directory.path)/bin' ;;
                  *) echo "unexpected: $*" >&2; exit 64 ;;
                esac
                """, mode: 0o755)
            // Runs the listed tests its --filter matches, as the plan says for their suite.
            directory.write("bin/devtrustPackageTests.xctest", """
                #!/usr/bin/python3
                import os, re, sys
                pattern = sys.argv[sys.argv.index("--filter") + 1]
                root = '\(directory.path)'
                with open(os.path.join(root, "asked.txt"), "a") as asked:
                    asked.write(pattern + "\\n")
                listed = [line.strip() for line in open(os.path.join(root, "listed.txt")) if line.strip()]
                plan = dict(line.rstrip("\\n").split("\\t") for line in open(os.path.join(root, "plan.tsv")) if line.strip())
                matched = [test for test in listed if re.search(pattern, test)]
                suite = matched[0].partition("/")[0] if matched else ""
                outcome = plan.get(suite, "pass")
                if outcome == "crash":
                    os.kill(os.getpid(), 9)
                ran = int(outcome.partition(":")[2]) if outcome.startswith("pass:") else len(matched)
                print("Test " + matched[0] + " started." if matched else "no test matched")
                if outcome.startswith("skip:"):
                    for test in matched[:int(outcome.partition(":")[2])]:
                        print("➜ Test " + test.partition("/")[2] + " skipped.")
                verdict = "failed" if outcome == "fail" else "passed"
                print(f"Test run with {ran} tests in 1 suite {verdict} after 0.001 seconds.")
                sys.exit(1 if outcome == "fail" else 0)
                """, mode: 0o755)
        }

        func run(_ arguments: [String] = [], ci: Bool = false) throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/python3", [directory.file("scripts/run-tests.py"), "--swift", directory.file("swift"),
                                                       "--log-dir", directory.file("logs")] + arguments,
                                  environment: ["PATH": "/usr/bin:/bin"].merging(ci ? ["CI": "true"] : [:]) { $1 })
        }

        var asked: [String] {
            String(decoding: directory.read("asked.txt") ?? [], as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    static let listed = ["A.One/first()", "A.One/second()", "A.Two/only()", "B.Three/x()", "B.Three/y()", "B.Three/z()"]

    @Test func everySuitePassingIsExitZeroAndRecordsDurations() throws {
        let runner = try Runner(listed: Self.listed, plan: [:])
        let result = try runner.run(["--jobs", "2"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("✔ 6 tests in 3 suites passed"), "\(result)")
        #expect(Set(runner.asked) == ["^A\\.One/", "^A\\.Two/", "^B\\.Three/"], "\(runner.asked)")
        let durations = String(decoding: runner.directory.read(".build/test-durations.tsv") ?? [], as: UTF8.self)
        #expect(durations.split(separator: "\n").map { $0.split(separator: "\t")[0] } == ["A.One", "A.Two", "B.Three"], "\(durations)")
    }

    @Test func aFailingSuiteFailsTheRunAndItsLogIsShown() throws {
        let runner = try Runner(listed: Self.listed, plan: ["A.Two": "fail"])
        let result = try runner.run()
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("✘ A.Two:") && result.stdout.contains("Test A.Two/only() started."), "\(result)")
        #expect(result.stdout.contains("1 of 3 test runs failed") && result.stdout.contains(": A.Two"), "\(result)")
    }

    /// A test process that dies without its summary line is a failure, not a run of 0 tests.
    @Test func aCrashedTestProcessFailsTheRun() throws {
        let runner = try Runner(listed: Self.listed, plan: ["B.Three": "crash"])
        let result = try runner.run()
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("✘ B.Three: 0 tests"), "\(result)")
    }

    /// The tests a suite's process ran are counted against `swift test list`: a filter that misses
    /// some fails the run, though every process passed (skipped tests: see below).
    @Test func fewerTestsThanListedFailTheRun() throws {
        let runner = try Runner(listed: Self.listed, plan: ["B.Three": "pass:2"])
        let result = try runner.run()
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("ran 2 tests of B.Three; `swift test list` has 3"), "\(result)")
    }

    /// Swift Testing counts a skipped test among those run: the runner lists the skipped ones, and
    /// on CI (CI=true), where every tool is installed, a skip fails the run.
    @Test func skippedTestsAreListedAndFailTheRunOnCI() throws {
        let runner = try Runner(listed: Self.listed, plan: ["B.Three": "skip:2"])
        let local = try runner.run()
        #expect(local.status == 0, "\(local)")
        #expect(local.stdout.contains("== 2 skipped: B.Three/x(), B.Three/y()") && local.stdout.contains("✔ 4 tests in 3 suites passed after"),
                "\(local)")
        #expect(local.stdout.contains(", 2 skipped"), "\(local)")
        let onCI = try runner.run(ci: true)
        #expect(onCI.status == 1 && onCI.stdout.contains("✘ tests were skipped on CI"), "\(onCI)")
    }

    /// A suite of SPLIT runs one process per test, each filter naming exactly one test.
    @Test func aSplitSuiteRunsEachTestInAProcessOfItsOwn() throws {
        let split = "DevtrustCLITests.BrowserExtensionTests"
        let runner = try Runner(listed: Self.listed + ["\(split)/opens()", "\(split)/opensTwice()"], plan: [:])
        let result = try runner.run(["--jobs", "3"])
        #expect(result.status == 0, "\(result)")
        let asked = runner.asked.filter { $0.contains("BrowserExtensionTests") }
        #expect(Set(asked) == ["^DevtrustCLITests\\.BrowserExtensionTests/opens\\(", "^DevtrustCLITests\\.BrowserExtensionTests/opensTwice\\("],
                "\(runner.asked)")
        #expect(result.stdout.contains("✔ 8 tests in 4 suites passed"), "\(result)")
    }

    @Test func suitePatternsChooseTheSuitesAndAPatternMatchingNoneIsAnError() throws {
        let runner = try Runner(listed: Self.listed, plan: [:])
        let chosen = try runner.run(["^A\\."])
        #expect(chosen.status == 0 && chosen.stdout.contains("✔ 3 tests in 2 suites passed"), "\(chosen)")
        #expect(!runner.asked.contains("^B\\.Three/"))
        let none = try runner.run(["Nothing"])
        #expect(none.status == 1 && none.stderr.contains("no suite matches Nothing"), "\(none)")
    }

    /// The fast tier runs only its listed suites; a listed suite that does not exist is an error,
    /// before anything runs (a renamed suite would otherwise leave the tier quietly).
    @Test func theFastTierRefusesASuiteThatDoesNotExist() throws {
        let runner = try Runner(listed: Self.listed, plan: [:], fastTier: ["A.One", "A.Gone"])
        let result = try runner.run(["--tier", "fast"])
        #expect(result.status == 1 && result.stderr.contains("Tests/fast-tier.txt names suites that do not exist: A.Gone"), "\(result)")
        #expect(runner.asked.isEmpty)
    }
}
