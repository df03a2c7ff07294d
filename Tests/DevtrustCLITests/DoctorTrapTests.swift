import DevtrustDevice
import DevtrustEncoding
import DevtrustTestSupport
import DevtrustURL
import Foundation
import Glibc
import Synchronization
import Testing

/// `devtrust doctor` against what an outside review broke it with, through the
/// binary: servers whose answers overflow or lie, a TPM that accepts and never
/// answers, a TCTI override, keystores with wrong modes, owners and symlinks,
/// configurations login refuses, device nodes and groups, missing or old
/// libraries. Each test fails where doctor crashed, hung, blamed the wrong
/// thing or gave a fix that does not work or destroys the key.
@Suite(.enabled(if: ExternalTool.python.shouldRun)) struct DoctorTrapTests {
    typealias Checks = [String: JSONObject]

    static func verdict(_ check: JSONObject?) -> String? { DoctorTests.verdict(check) }
    static func detail(_ check: JSONObject?) -> String { DoctorTests.detail(check) }
    static func fix(_ check: JSONObject?) -> String { DoctorTests.fix(check) }

    /// Registrations with `servers` written into the keystore (for servers no flow can register with).
    static func addRegistrations(_ keystore: String, servers: [String]) throws {
        try HostileLocalInputTests.editManifest(keystore) { manifest in
            let fingerprint = manifest["key"]?.objectValue?["fingerprint"] ?? .null
            manifest["registrations"] = .array(servers.enumerated().map { index, server in
                .object(["registrationId": .string("doctor-\(index)"), "server": .string(server), "flowType": .string("REGISTRATION"),
                         "keyFingerprint": fingerprint, "registeredAt": .string("2026-11-30T00:00:00Z")])
            })
        }
    }

    /// HTTP servers on loopback, one per `Age` value ("-" for none): each answers any GET 200 with a
    /// Date of now and that Age. Announces "listening on PORT,PORT,...".
    static let ageServers = """
        import http.server, socketserver, sys, threading
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                if self.server.age != "-": self.send_header("Age", self.server.age)
                self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
            def log_message(self, *args): pass
        ports = []
        for age in sys.argv[1:]:
            server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler); server.age = age; server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start(); ports.append(str(server.server_address[1]))
        print("listening on " + ",".join(ports), flush=True)
        threading.Event().wait()
        """

    /// `count` pairs of loopback ports (P and P+1, as a swtpm TCTI uses them) that accept
    /// connections and never answer. Announces "listening on P,P,...".
    static let blackHoles = """
        import socket, sys, threading
        held, firsts = [], []
        def accept(listener):
            while True:
                connection, _ = listener.accept(); held.append(connection)
        while len(firsts) < int(sys.argv[1]):
            first = socket.socket(); first.bind(("127.0.0.1", 0)); port = first.getsockname()[1]
            second = socket.socket()
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                first.close(); second.close(); continue
            for listener in (first, second):
                listener.listen(64); threading.Thread(target=accept, args=(listener,), daemon=True).start()
            firsts.append(str(port))
        print("listening on " + ",".join(firsts), flush=True)
        threading.Event().wait()
        """

    static func ports(_ process: ListeningProcess) -> [Int] {
        process.announced.split(separator: ",").compactMap { Int($0) }
    }

    /// Seconds `body` took.
    static func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let start = Date()
        let value = try body()
        return (value, Date().timeIntervalSince(start))
    }

    // MARK: clock

    /// Age headers that overflow 64 bits, are negative or are not digits: no crash (it trapped,
    /// exit 132, with nothing on stdout for --json); a warning that says why. An Age in range counts.
    @Test func agesThatOverflowOrAreNotDigitsAreWarningsNotACrash() throws {
        let ages = ["9223372036854775807", "-9223372036854775808", "-400", "99999999999999999999999", "+5", "3600"]
        let servers = try ListeningProcess(ExternalTool.python.rawValue, ["-c", Self.ageServers] + ages, what: "the Age servers")
        let urls = Self.ports(servers).map { "http://127.0.0.1:\($0)" }
        #expect(urls.count == ages.count)
        let device = try DeviceFixture<DevtrustBinary>()
        try Self.addRegistrations(device.directory.file("ks"), servers: urls)
        let (result, checks) = try DoctorTests.doctor(device.cli)
        #expect(result.status == 1, "\(result)")
        for (age, url) in zip(ages, urls) {
            let clock = checks["clock." + url]
            switch age {
            case "9223372036854775807", "99999999999999999999999":
                #expect(Self.verdict(clock) == "warn" && Self.detail(clock).contains("more than a day"), "\(age): \(String(describing: clock))")
            case "3600":
                let detail = Self.detail(clock)
                let seconds = Int(detail.dropFirst("this machine's clock is ".count).prefix { $0.isNumber })
                #expect(Self.verdict(clock) == "fail" && seconds.map { (3598...3602).contains($0) } == true && detail.contains(" s behind "),
                        "\(String(describing: clock))")
            default:
                // RFC 9111: delta-seconds are digits only; "-400" was taken as 400 s in the future.
                #expect(Self.verdict(clock) == "warn" && Self.detail(clock).contains("(\"\(age)\"; RFC 9111 allows digits only)"),
                        "\(age): \(String(describing: clock))")
            }
        }
        let human = try device.cli.run("doctor")
        #expect(human.status == 1 && human.stdout.hasSuffix("16 checks: 7 pass, 5 warn, 1 fail, 3 skip\n"), "\(human)")
    }

    /// The warning band (5 s to the tolerance) and the machine-ahead failure (more than 30 s
    /// ahead of the server: it refuses the tokens).
    @Test func aClockSlightlyOffWarnsAndOneAheadOfTheServerFails() throws {
        for (offset, verdict) in [("20", "warn"), ("-120", "fail")] {
            let setup = try ReferenceServerFixture<DevtrustBinary>(["--clock-offset", offset], register: true)
            let (_, checks) = try DoctorTests.doctor(setup.cli)
            let clock = checks["clock." + Origin.text(of: setup.server.url)]
            let detail = Self.detail(clock)
            let seconds = Int(detail.dropFirst("this machine's clock is ".count).prefix { $0.isNumber }) ?? 0
            #expect(Self.verdict(clock) == verdict && abs(seconds - abs(Int(offset)!)) <= 2, "\(offset): \(String(describing: clock))")
            if verdict == "warn" {
                #expect(detail.contains(" s behind ") && detail.contains("within what the server accepts"), "\(detail)")
            } else {
                #expect(detail.contains(" s ahead of ") && detail.contains("the server refuses device tokens more than 30 s in its future"), "\(detail)")
            }
        }
    }

    /// Servers that accept and never answer are asked at once, each within curl's 5 s timeout
    /// (they took 5 s each, one after the other); the warning is curl's own timeout.
    @Test func serversThatNeverAnswerAreAskedTogetherWithinTheirTimeout() throws {
        let holes = try ListeningProcess(ExternalTool.python.rawValue, ["-c", Self.blackHoles, "3"], what: "the black holes")
        let device = try DeviceFixture<DevtrustBinary>()
        let urls = Self.ports(holes).map { "http://127.0.0.1:\($0)" }
        try Self.addRegistrations(device.directory.file("ks"), servers: urls)
        let ((result, checks), seconds) = try Self.timed { try DoctorTests.doctor(TimeLimitedRunner(device.cli)) }
        #expect(result.status == 0 && seconds < 12, "\(seconds) s: \(result)")
        for url in urls {
            let clock = checks["clock." + url]
            #expect(Self.verdict(clock) == "warn" && Self.detail(clock).contains("did not answer in time (Operation timed out after 50"),
                    "\(String(describing: clock))")
        }
    }

    /// A self-signed certificate every command refuses is a failure, not "did not answer";
    /// a CA file that is missing or not PEM is checked (tls.ca-file); the right one passes.
    @Test(.enabled(if: ExternalTool.openssl.shouldRun)) func anUntrustedCertificateOrABadCAFileFails() throws {
        let authority = try TestCertificateAuthority()
        let setup = try ReferenceServerFixture<DevtrustBinary>(["--tls-cert", authority.serverCertificate, "--tls-key", authority.serverKey])
        #expect(try setup.register(["--ca-file", authority.caCertificate, "-q"]).status == 0)
        let id = "clock." + Origin.text(of: setup.server.url)

        let (untrusted, checks) = try DoctorTests.doctor(setup.cli)
        #expect(untrusted.status == 1 && checks["tls.ca-file"] == nil, "\(untrusted)")
        #expect(Self.verdict(checks[id]) == "fail" && Self.detail(checks[id]).contains("is not trusted") && Self.fix(checks[id]).contains("--ca-file FILE"),
                "\(String(describing: checks[id]))")

        let (trusted, good) = try DoctorTests.doctor(setup.cli, ["--ca-file", authority.caCertificate])
        #expect(trusted.status == 0 && Self.verdict(good[id]) == "pass", "\(String(describing: good[id]))")
        #expect(Self.verdict(good["tls.ca-file"]) == "pass" && Self.detail(good["tls.ca-file"]) == "\(authority.caCertificate) (--ca-file) holds 1 PEM certificate")

        let garbage = setup.directory.write("garbage.pem", "not a certificate\n")
        for (file, words) in [(setup.directory.file("missing.pem"), "cannot be read (No such file or directory)"), (garbage, "holds no PEM certificate")] {
            let (result, bad) = try DoctorTests.doctor(setup.cli, ["--ca-file", file])
            #expect(result.status == 1 && Self.verdict(bad["tls.ca-file"]) == "fail" && Self.detail(bad["tls.ca-file"]).contains(words),
                    "\(file): \(String(describing: bad["tls.ca-file"]))")
            #expect(Self.fix(bad["tls.ca-file"]).hasPrefix("point --ca-file at a PEM file"))
            #expect(Self.verdict(bad[id]) == "fail", "\(String(describing: bad[id]))")
        }
    }

    /// A URL with a user and password in the keystore is never shown with them; a URL no
    /// command can use fails as such, not as a server that did not answer.
    @Test func credentialsInAServerURLAreNotShownAndABadURLIsNotANetworkProblem() throws {
        let device = try DeviceFixture<DevtrustBinary>()
        try Self.addRegistrations(device.directory.file("ks"), servers: ["https://user:s3cret@127.0.0.1:25004", "not a url"])
        let (result, checks) = try DoctorTests.doctor(device.cli)
        let human = try device.cli.run("doctor")
        for output in [result.stdout, result.stderr, human.stdout, human.stderr] {
            #expect(!output.contains("s3cret") && !output.contains("user:"), "\(output)")
        }
        let credentials = checks["clock.https://127.0.0.1:25004"]
        #expect(Self.verdict(credentials) == "fail" && Self.detail(credentials).contains("https://[redacted]@127.0.0.1:25004"), "\(checks.keys.sorted())")
        let bad = checks["clock.not a url"]
        #expect(Self.verdict(bad) == "fail" && Self.detail(bad).contains("which is not a URL devtrust can use"), "\(String(describing: bad))")
        #expect(Self.fix(bad) == "register again with the server's base URL (devtrust register --server URL)")
    }

    // MARK: TPM

    /// A TCTI variable naming another TPM than the one recorded with the key: the key is not
    /// lost (it was "run devtrust init --force"): doctor says which TPM is which and how to use the key's.
    @Test(.enabled(if: Swtpm.shouldRun)) func aTCTIOverrideIsNamedAndTheKeyIsNotCalledLost() throws {
        let setup = try SwtpmDeviceFixture()
        let other = try Swtpm()
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = ""
        #expect(try cli.run("init", "--backend", "tpm", "--tcti", setup.tpm.tcti, "-q").status == 0)
        let (plain, healthy) = try DoctorTests.doctor(cli)
        #expect(plain.status == 0 && Self.verdict(healthy["key.signs"]) == "pass", "\(plain)")

        for override in [other.tcti, "device:/nonexistent/tpmrm0"] {
            var overridden = cli
            overridden.extraEnvironment["DEVTRUST_TCTI"] = override
            let (result, checks) = try DoctorTests.doctor(overridden)
            #expect(result.status == 1, "\(result)")
            let key = checks["key.signs"]
            #expect(Self.verdict(key) == "fail", "\(String(describing: key))")
            #expect(Self.detail(key).hasPrefix("the key was recorded with \(setup.tpm.tcti) at init, but DEVTRUST_TCTI makes this run use \(override). Through \(override): "),
                    "\(Self.detail(key))")
            #expect(Self.detail(key).hasSuffix("through \(setup.tpm.tcti), the key's own TPM, it loads and signs"), "\(Self.detail(key))")
            #expect(Self.fix(key) == "unset DEVTRUST_TCTI (the key's TPM is \(setup.tpm.tcti)), or give --tcti \(setup.tpm.tcti)", "\(Self.fix(key))")
            #expect(Self.detail(checks["tpm.reachable"]).contains("(the key was recorded with \(setup.tpm.tcti) at init, but DEVTRUST_TCTI makes this run use \(override))"),
                    "\(String(describing: checks["tpm.reachable"]))")
            for (id, check) in checks { #expect(!Self.fix(check).contains("init --force"), "\(id): \(check)") }
        }
        let (_, explicit) = try DoctorTests.doctor(cli, ["--tcti", other.tcti])
        #expect(Self.fix(explicit["key.signs"]) == "leave out --tcti \(other.tcti) (the key's TPM is \(setup.tpm.tcti)), or give --tcti \(setup.tpm.tcti)",
                "\(String(describing: explicit["key.signs"]))")
    }

    /// A TCTI that accepts and never answers (the TSS waits for ever): doctor and status end
    /// within seconds, with the TPM's checks failed or warned, for a software key and a TPM key.
    @Test(.enabled(if: Swtpm.shouldRun)) func aTPMThatNeverAnswersEndsDoctorAndStatusInSeconds() throws {
        let holes = try ListeningProcess(ExternalTool.python.rawValue, ["-c", Self.blackHoles, "1"], what: "the black hole")
        let silent = "swtpm:host=127.0.0.1,port=\(Self.ports(holes)[0])"

        var software = try DeviceFixture<DevtrustBinary>()
        software.cli.extraEnvironment["DEVTRUST_TCTI"] = silent
        let softwareCLI = TimeLimitedRunner(software.cli)
        let ((result, checks), seconds) = try Self.timed { try DoctorTests.doctor(softwareCLI) }
        #expect(result.status == 0 && seconds < 30, "\(seconds) s: \(result)")
        #expect(Self.verdict(checks["key.signs"]) == "pass")
        #expect(Self.verdict(checks["tpm.reachable"]) == "warn" && Self.detail(checks["tpm.reachable"]).hasPrefix("the TPM at \(silent) did not answer within 5 s"),
                "\(String(describing: checks["tpm.reachable"]))")
        let (status, statusSeconds) = try Self.timed { try softwareCLI.run("status") }
        #expect(status.status == 0 && statusSeconds < 30 && status.stdout.contains("TPM: no TPM at \(silent) (no answer within 5 s)"), "\(statusSeconds) s: \(status)")

        let setup = try SwtpmDeviceFixture()
        #expect(try setup.cli.run("init", "--backend", "tpm", "-q").status == 0)
        var tpmKey = TimeLimitedRunner(setup.cli)
        tpmKey.extraEnvironment["DEVTRUST_TCTI"] = silent
        let ((tpmResult, tpmChecks), tpmSeconds) = try Self.timed { try DoctorTests.doctor(tpmKey) }
        #expect(tpmResult.status == 1 && tpmSeconds < 60, "\(tpmSeconds) s: \(tpmResult)")
        let key = tpmChecks["key.signs"]
        #expect(Self.verdict(key) == "fail" && Self.detail(key).contains("Through \(silent): the TPM at \(silent) did not answer within 10 s"), "\(String(describing: key))")
        #expect(Self.detail(key).hasSuffix("through \(setup.tpm.tcti), the key's own TPM, it loads and signs"), "\(String(describing: key))")
        #expect(Self.verdict(tpmChecks["tpm.reachable"]) == "fail" && Self.detail(tpmChecks["tpm.reachable"]).contains("did not answer within 10 s"),
                "\(String(describing: tpmChecks["tpm.reachable"]))")
        let (tpmStatus, tpmStatusSeconds) = try Self.timed { try tpmKey.run("status") }
        #expect(tpmStatus.status == 6 && tpmStatusSeconds < 60 && tpmStatus.stderr.contains("no TPM at \(silent) (no answer within 10 s)"),
                "\(tpmStatusSeconds) s: \(tpmStatus)")
    }

    /// The commands a script runs per request end with the TPM's exit code and a message when the TPM
    /// accepts and never answers (they waited for ever: `$(devtrust token)` held the script).
    @Test(.enabled(if: Swtpm.shouldRun)) func aTPMThatNeverAnswersEndsTheKeyCommandsWithExitSix() throws {
        let holes = try ListeningProcess(ExternalTool.python.rawValue, ["-c", Self.blackHoles, "1"], what: "the black hole")
        let silent = "swtpm:host=127.0.0.1,port=\(Self.ports(holes)[0])"
        let setup = try SwtpmDeviceFixture()
        #expect(try setup.cli.run("init", "--backend", "tpm", "-q").status == 0)
        // pubkey reads the key file only, and answers.
        var answering = setup.cli
        answering.extraEnvironment["DEVTRUST_TCTI"] = silent
        #expect(try answering.run("pubkey").status == 0)
        // A DPoP sign-in made while the TPM answers: its proofs (dpop-proof, a refresh's) are bounded too.
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let login = try setup.cli.run("login", "--device-code", "--dpop", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0, "\(login)")
        var silentCLI = TimeLimitedRunner(setup.cli)
        silentCLI.extraEnvironment["DEVTRUST_TCTI"] = silent
        let cli = silentCLI
        let hint = ": check that the TPM, its resource manager or the simulator is working (`devtrust doctor` checks it), then try again\n"
        let cases: [([String], String)] = [(["token", "--device-id", "d"], "loading the device key and signing the token"),
                                           (["device-data"], "signing the deviceData"), (["sign-challenge", "c2lnbiB0aGlzIHBsZWFzZQ"], "signing the challenge"),
                                           (["token", "--device-id", "d", "--json"], "loading the device key and signing the token"),
                                           (["dpop-proof", "--method", "GET", "--url", server.url + "/resource"], "loading the device key and signing the proof"),
                                           (["access-token", "--refresh"], "signing a DPoP proof")]
        // Side by side: each waits out the deadline.
        let results = Mutex([Int: (Result<ProcessResult, any Error>, Double)]())
        let finished = DispatchGroup()
        for index in cases.indices {
            finished.enter()
            Thread {
                let start = Date()
                let result = Result { try cli.run(cases[index].0) }
                results.withLock { $0[index] = (result, Date().timeIntervalSince(start)) }
                finished.leave()
            }.start()
        }
        finished.wait()
        for (index, (arguments, what)) in cases.enumerated() {
            let (outcome, seconds) = try #require(results.withLock { $0[index] })
            let result = try outcome.get()
            #expect(result.status == 6 && seconds < 60 && result.stdout.isEmpty, "\(arguments): \(seconds) s: \(result)")
            if arguments.last == "--json" {
                let error = try JSONParser.parse(result.stderr).objectValue?["error"]?.objectValue
                #expect(error?["exitCode"] == .integer(6) && error?["message"] == .string("the TPM did not answer within 30 s (\(what))"), "\(result)")
            } else {
                #expect(result.stderr == "devtrust: error: the TPM did not answer within 30 s (\(what))" + hint, "\(arguments): \(result)")
            }
        }
    }

    /// Another program's key where the device key's storage root key was: the key works through a
    /// copy made for every signature, which is a warning with the fix, not a pass.
    @Test(.enabled(if: Swtpm.shouldRun)) func aStorageRootKeyReplacedByAnotherProgramIsAWarningWithTheFix() throws {
        let setup = try SwtpmDeviceFixture()
        #expect(try setup.cli.run("init", "--backend", "tpm", "-q").status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try setup.tpm.persistPrimary(["-C", "o", "-p", "pw"], at: "0x81000001", in: setup.directory)
        let (result, checks) = try DoctorTests.doctor(setup.cli)
        let key = checks["key.signs"]
        #expect(result.status == 0 && Self.verdict(key) == "warn", "\(String(describing: key))")
        #expect(Self.detail(key).contains("another program replaced it"), "\(Self.detail(key))")
        #expect(Self.fix(key).hasPrefix("find which program put its key at 0x81000001 and have that key moved to another handle; then put the storage root key back at 0x81000001: tpm2_createprimary"),
                "\(Self.fix(key))")
    }

    /// tpm2-tss missing with the key in the TPM: both TPM checks say what to install (they said
    /// "check that the TPM is running" and "see devtrust status").
    @Test(.enabled(if: Swtpm.shouldRun && HiddenLibrary.isPossible("libtss2-esys.so.0"))) func withoutTheTSSATPMKeyIsToldWhatToInstall() throws {
        let tpm = try Swtpm()
        let scratch = TemporaryDirectory()
        var maker = DevtrustBinary(keystore: scratch.file("ks"))
        maker.extraEnvironment["DEVTRUST_TCTI"] = tpm.tcti
        #expect(try maker.run("init", "--backend", "tpm", "-q").status == 0)
        var cli = HiddenLibrary.devtrust(hiding: "libtss2-esys.so.0", in: scratch)
        cli.extraEnvironment["DEVTRUST_TCTI"] = ""  // the TCTI recorded with the key
        let (result, checks) = try DoctorTests.doctor(cli)
        #expect(result.status == 1)
        let install = "sudo apt-get install libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-mu0 libtss2-rc0"
        for id in ["tpm.reachable", "key.signs", "library.tss2-esys"] {
            #expect(Self.verdict(checks[id]) == "fail" && Self.fix(checks[id]) == install, "\(id): \(String(describing: checks[id]))")
        }
    }

    /// A missing resource manager node beside the TPM's own one is said as such; a misspelt
    /// TCTI name is not a package to install.
    @Test func aMissingResourceManagerAndAMisspeltTCTIAreNamed() throws {
        let devices = TemporaryDirectory("dev")
        devices.write("tpm0", "")
        var device = try DeviceFixture<DevtrustBinary>()
        device.cli.extraEnvironment["DEVTRUST_TCTI"] = "device:\(devices.path)/tpmrm0"
        let (_, checks) = try DoctorTests.doctor(device.cli)
        #expect(Self.verdict(checks["tpm.device-permissions"]) == "skip"
                && Self.detail(checks["tpm.device-permissions"]).hasPrefix("\(devices.path)/tpmrm0 does not exist, but \(devices.path)/tpm0 does: the TPM has no kernel resource manager"),
                "\(String(describing: checks["tpm.device-permissions"]))")
        #expect(Self.detail(checks["tpm.reachable"]).contains("the TPM at \(devices.path)/tpm0 has no kernel resource manager"), "\(String(describing: checks["tpm.reachable"]))")

        device.cli.extraEnvironment["DEVTRUST_TCTI"] = "devcie:/dev/tpmrm0"
        let (_, misspelt) = try DoctorTests.doctor(device.cli)
        let tcti = misspelt["library.tcti"]
        #expect(Self.verdict(tcti) == "warn" && Self.detail(tcti).hasPrefix("unknown TCTI \"devcie\""), "\(String(describing: tcti))")
        #expect(Self.fix(tcti).hasPrefix("the TCTIs are device, tabrmd, swtpm, mssim, cmd and pcap") && !Self.fix(tcti).contains("apt-get"), "\(Self.fix(tcti))")
    }

    /// Run as nobody against device nodes of each kind: what tpm.group and tpm.reachable say
    /// matches the node (its mode and group) and the session's groups.
    @Test(.enabled(if: getuid() == 0 && getgrnam("tss") != nil && getgrnam("disk") != nil)) func theGroupChecksFollowTheNodeAndTheSession() throws {
        let shared = "/tmp/devtrust-doctor-groups-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(shared, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared)
        var maker = DevtrustBinary(keystore: shared + "/ks")
        maker.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try maker.run("init", "--backend", "software", "-q").status == 0)
        for path in [shared + "/ks"] + (try FileManager.default.contentsOfDirectory(atPath: shared + "/ks")).map({ shared + "/ks/" + $0 }) {
            chown(path, 65534, 65534)
        }
        let tss = getgrnam("tss")!.pointee.gr_gid, disk = getgrnam("disk")!.pointee.gr_gid
        func node(_ name: String, group: gid_t, mode: mode_t) throws -> String {
            let path = shared + "/" + name
            // dev_t for major 1, minor 3 (/dev/null's numbers; makedev is a macro Swift cannot call).
            guard mknod(path, mode_t(S_IFCHR) | mode, dev_t(1 << 8 | 3)) == 0 else { throw FixtureError("mknod \(path): \(String(cString: strerror(errno)))") }
            chown(path, 0, group)
            chmod(path, mode)
            return path
        }
        func doctor(_ node: String, _ privileges: [String]) throws -> Checks {
            try DoctorTests.doctor(SetprivRunner(binary: binary, keystore: shared + "/ks", tcti: "device:" + node, privileges: privileges)).checks
        }
        let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]

        // Only root may open it: no group membership helps until tpm-udev's rule gives it to tss.
        let rootOnly = try node("root-only", group: 0, mode: 0o600)
        let outsider = try doctor(rootOnly, nobody)["tpm.group"]
        #expect(Self.verdict(outsider) == "warn" && Self.detail(outsider).contains("gives no group access, so no group membership opens it read-write")
                && !Self.detail(outsider).contains("whose members may open"), "\(String(describing: outsider))")
        #expect(Self.fix(outsider).hasPrefix("sudo apt-get install tpm-udev"), "\(Self.fix(outsider))")
        let member = try doctor(rootOnly, ["--reuid=65534", "--regid=65534", "--groups=\(tss)"])["tpm.group"]
        #expect(Self.verdict(member) == "warn" && Self.detail(member).contains("you are in group tss, which cannot open it until its mode gives the group read-write access"),
                "\(String(describing: member))")

        // Group tss may only read it.
        let readOnly = try doctor(try node("read-only", group: tss, mode: 0o640), nobody)["tpm.group"]
        #expect(Self.detail(readOnly).contains("gives its group tss read access only"), "\(String(describing: readOnly))")

        // Group disk may open it: every check names disk, none tss.
        let diskChecks = try doctor(try node("disk", group: disk, mode: 0o660), nobody)
        #expect(Self.fix(diskChecks["tpm.device-permissions"]) == "sudo usermod -aG disk nobody, then log out and back in")
        #expect(Self.fix(diskChecks["tpm.reachable"]).contains("add yourself to group disk (sudo usermod -aG disk $USER") && !Self.fix(diskChecks["tpm.reachable"]).contains("tss"),
                "\(String(describing: diskChecks["tpm.reachable"]))")

        // Listed in the group (nobody's primary group, nogroup) but not in this session's groups.
        let nogroup = try node("nogroup", group: 65534, mode: 0o660)
        let stale = try doctor(nogroup, ["--reuid=65534", "--regid=\(tss)", "--clear-groups"])["tpm.group"]
        #expect(Self.verdict(stale) == "warn" && Self.detail(stale) == "you were added to group nogroup after this login session started: the membership applies from the next login",
                "\(String(describing: stale))")
        #expect(Self.fix(stale) == "log out and back in (or run `newgrp nogroup`)")

        // In group tss in this session (not in /etc/group): the node opens.
        let tssNode = try node("tss", group: tss, mode: 0o660)
        let joined = try doctor(tssNode, ["--reuid=65534", "--regid=65534", "--groups=\(tss)"])
        #expect(Self.verdict(joined["tpm.group"]) == "pass" && Self.detail(joined["tpm.group"]) == "you are in group tss, whose members may open \(tssNode)",
                "\(String(describing: joined["tpm.group"]))")
        #expect(Self.verdict(joined["tpm.device-permissions"]) == "pass")
    }

    // MARK: keystore

    /// What keystore.permissions says of modes is read from the files; a directory devtrust
    /// cannot write in fails (register failed with exit 7 while doctor said "mode 0700").
    @Test(.enabled(if: getuid() == 0)) func theModesSaidAreTheModesFound() throws {
        let device = try DeviceFixture<DevtrustBinary>()
        let keystore = device.directory.file("ks")
        let keyFile = try #require(device.directory.entries("ks").first { $0.hasPrefix("key-") })
        chmod(keystore + "/" + keyFile, 0o400)
        let (_, checks) = try DoctorTests.doctor(device.cli)
        let permissions = checks["keystore.permissions"]
        #expect(Self.verdict(permissions) == "pass" && Self.detail(permissions).contains("\(keyFile) 0400") && !Self.detail(permissions).contains("files 0600"),
                "\(String(describing: permissions))")

        let shared = "/tmp/devtrust-doctor-modes-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(shared, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared)
        #expect(rename(keystore, shared + "/ks") == 0)
        for path in [shared + "/ks"] + (try FileManager.default.contentsOfDirectory(atPath: shared + "/ks")).map({ shared + "/ks/" + $0 }) {
            chown(path, 65534, 65534)
        }
        chmod(shared + "/ks", 0o500)
        let (_, locked) = try DoctorTests.doctor(NobodyRunner(binary: binary, keystore: shared + "/ks", tcti: "device:/nonexistent"))
        #expect(Self.verdict(locked["keystore.permissions"]) == "fail"
                && Self.detail(locked["keystore.permissions"]) == "\(shared)/ks is mode 0500: devtrust cannot write in it (init, register, login and refreshes fail)",
                "\(String(describing: locked["keystore.permissions"]))")
        #expect(Self.fix(locked["keystore.permissions"]) == "chmod 700 \(shared)/ks")
    }

    /// A key file that is a symlink to the user's own copy: the fix puts the copy in its place (it
    /// said "rm the key, then devtrust init --force"), and it works; the other commands say so too.
    @Test func aSymlinkedKeyFileIsReplacedByItsTargetNotByANewKey() throws {
        let device = try DeviceFixture<DevtrustBinary>()
        let keyFile = try #require(device.directory.entries("ks").first { $0.hasPrefix("key-") })
        let link = device.directory.file("ks/" + keyFile), copy = device.directory.file("key-copy.pem")
        #expect(rename(link, copy) == 0 && symlink(copy, link) == 0)
        let (result, checks) = try DoctorTests.doctor(device.cli)
        #expect(result.status == 1)
        let permissions = checks["keystore.permissions"]
        #expect(Self.detail(permissions) == "\(link) is a symlink (to \(copy)), which devtrust refuses to follow", "\(String(describing: permissions))")
        let command = "cp --remove-destination -- \(copy) \(link) && chmod 600 \(link)"
        #expect(Self.fix(permissions) == "if \(copy) is the device key's file, put it in the link's place: " + command, "\(Self.fix(permissions))")
        #expect(Self.fix(checks["key.signs"]) == "fix keystore.permissions first", "\(String(describing: checks["key.signs"]))")
        for (id, check) in checks { #expect(!Self.fix(check).contains("init --force") && !Self.fix(check).hasPrefix("rm "), "\(id): \(check)") }

        let token = try device.cli.run("token", "--device-id", "x")
        #expect(token.status == 7 && token.stderr.contains("put that copy in its place: cp --remove-destination") && !token.stderr.contains("Remove it and run"),
                "\(token)")
        #expect(try ProcessRunner.run("/bin/sh", ["-c", command]).status == 0)
        let (fixed, _) = try DoctorTests.doctor(device.cli)
        #expect(fixed.status == 0, "\(fixed)")
    }

    /// A key file gone or damaged: the key is lost, and the fix says what goes with it; the fix
    /// works (`devtrust init` said to run `devtrust init`, which then asked for --force).
    @Test func aLostKeyFileGetsAFixThatWorksAndSaysWhatIsLost() throws {
        for damage in ["missing", "corrupt"] {
            let setup = try ReferenceServerFixture<DevtrustBinary>(register: true)
            let keyFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("key-") })
            let fingerprint = try #require(try setup.status()["key"]?.objectValue?["fingerprint"]?.stringValue)
            if damage == "missing" { unlink(setup.directory.file("ks/" + keyFile)) } else { setup.directory.write("ks/" + keyFile, "garbage\n") }
            let (_, checks) = try DoctorTests.doctor(setup.cli)
            let key = checks["key.signs"]
            #expect(Self.verdict(key) == "fail", "\(damage): \(String(describing: key))")
            #expect(Self.fix(key) == "unless you have a good copy of that file (put it back), the device key (fingerprint \(fingerprint)) cannot be recovered: `devtrust init --force` makes a new one; its registration with \(setup.server.url) is forgotten: register again",
                    "\(damage): \(Self.fix(key))")
            let again = try setup.cli.run("init")
            #expect(again.status == 7 && again.stderr.contains("`devtrust init --force` makes a new") && !again.stderr.contains("run `devtrust init` (then"),
                    "\(damage): \(again)")
            #expect(try setup.cli.run("init", "--force", "-q").status == 0)
            let (fixed, after) = try DoctorTests.doctor(setup.cli)
            #expect(fixed.status == 0 && Self.verdict(after["key.signs"]) == "pass", "\(damage): \(fixed)")
        }
    }

    /// A keystore path with ". " in it: the fix is the whole command (it was cut at ". "), in
    /// doctor and in every command's --json hint.
    @Test func aPathWithAFullStopAndASpaceKeepsItsFixWhole() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("my. ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        let keyFile = try #require(directory.entries("my. ks").first { $0.hasPrefix("key-") })
        let path = directory.file("my. ks/" + keyFile)
        chmod(path, 0o640)
        let (_, checks) = try DoctorTests.doctor(cli)
        #expect(Self.fix(checks["keystore.permissions"]) == "chmod 600 '\(path)'", "\(String(describing: checks["keystore.permissions"]))")
        let token = try cli.run("token", "--device-id", "x", "--json")
        let error = try JSONOutputTests.errorObject(token)
        #expect(error["message"] == .string("\(path) is accessible by other users (mode 640); devtrust refuses to use it"), "\(error)")
        #expect(error["hint"] == .string("Run: chmod 600 '\(path)'"), "\(error)")
    }

    /// A keystore of another user: as root, one chown for the whole keystore (one per file
    /// before); as another user, no chown at all (it handed that user's key to the caller).
    @Test(.enabled(if: getuid() == 0)) func anotherUsersKeystoreIsNotTakenOver() throws {
        let shared = "/tmp/devtrust-doctor-owner-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(shared, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared)
        var root = DevtrustBinary(keystore: shared + "/ks")
        root.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try root.run("init", "--backend", "software", "-q").status == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: shared + "/ks").map { shared + "/ks/" + $0 }

        let (_, asNobody) = try DoctorTests.doctor(NobodyRunner(binary: binary, keystore: shared + "/ks", tcti: "device:/nonexistent"))
        let foreign = asNobody["keystore.permissions"]
        #expect(Self.verdict(foreign) == "fail" && Self.detail(foreign).contains("belongs to another user (root, uid 0)"), "\(String(describing: foreign))")
        #expect(Self.fix(foreign) == "use a keystore of your own (--keystore DIR or DEVTRUST_KEYSTORE=DIR)", "\(Self.fix(foreign))")

        // One file another user's, in root's own keystore: one command for all.
        chown(files.first { $0.contains("/key-") }!, 65534, 65534)
        let (_, oneFile) = try DoctorTests.doctor(root)
        #expect(Self.fix(oneFile["keystore.permissions"]) == "chown -R 0 \(shared)/ks (the keystore directory is yours: its files should be too)",
                "\(String(describing: oneFile["keystore.permissions"]))")

        for path in [shared + "/ks"] + files { chown(path, 65534, 65534) }
        let (_, asRoot) = try DoctorTests.doctor(root)
        let fix = Self.fix(asRoot["keystore.permissions"])
        #expect(fix.components(separatedBy: "chown").count == 2 && fix.hasSuffix("chown -R 0 \(shared)/ks"), "\(fix)")
    }

    /// A sign-in's token file others can read is refused by every command: a failure here too.
    @Test func aSignInFileOthersCanReadFails() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>()
        #expect(try setup.login().status == 0)
        let signIn = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        let path = setup.directory.file("ks/" + signIn)
        chmod(path, 0o644)
        let (result, checks) = try DoctorTests.doctor(setup.cli)
        #expect(result.status == 1 && Self.verdict(checks["keystore.permissions"]) == "fail", "\(String(describing: checks["keystore.permissions"]))")
        #expect(Self.fix(checks["keystore.permissions"]) == "chmod 600 \(path)")
    }

    // MARK: configuration and libraries

    /// A profile login refuses fails config.valid; the fixes fit the file: one named by
    /// DEVTRUST_CONFIG is not "moved aside", a directory is no file to chmod, the top level is said
    /// in words, a file only its owner may read is not the user's to chmod.
    @Test(.enabled(if: getuid() == 0)) func configurationFixesFitTheFile() throws {
        var device = try DeviceFixture<DevtrustBinary>()
        let profile = device.directory.write("profile.json", #"{"signIn":{"profiles":{"p":{"server":"http://example.com","clientId":"x"}}}}"#)
        device.cli.extraEnvironment["DEVTRUST_CONFIG"] = profile
        let (_, refused) = try DoctorTests.doctor(device.cli)
        #expect(Self.verdict(refused["config.valid"]) == "fail"
                && Self.detail(refused["config.valid"]).contains("`devtrust login --profile` refuses sign-in profile \"p\": http://example.com uses plain http"),
                "\(String(describing: refused["config.valid"]))")

        let array = device.directory.write("array.json", "[]")
        device.cli.extraEnvironment["DEVTRUST_CONFIG"] = array
        let (_, topLevel) = try DoctorTests.doctor(device.cli)
        #expect(Self.fix(topLevel["config.valid"]) == "make \(array) one JSON object at its top level ({...}; docs/configuration.md), or stop naming it (--config, DEVTRUST_CONFIG)",
                "\(String(describing: topLevel["config.valid"]))")

        mkdir(device.directory.file("config-dir"), 0o700)
        device.cli.extraEnvironment["DEVTRUST_CONFIG"] = device.directory.file("config-dir")
        let (_, directory) = try DoctorTests.doctor(device.cli)
        #expect(Self.fix(directory["config.valid"]) == "point --config (or DEVTRUST_CONFIG) at the configuration file, not a directory",
                "\(String(describing: directory["config.valid"]))")

        let home = device.directory.file("xdg")
        mkdir(home, 0o700)
        mkdir(home + "/devtrust", 0o700)
        device.directory.write("xdg/devtrust/config.json", "{")
        device.cli.extraEnvironment["DEVTRUST_CONFIG"] = nil
        device.cli.extraEnvironment["XDG_CONFIG_HOME"] = home
        let (_, defaultLocation) = try DoctorTests.doctor(device.cli)
        #expect(Self.fix(defaultLocation["config.valid"]).hasSuffix("or move it aside (then /etc/devtrust/config.json applies if there is one, else the built-in defaults)"),
                "\(String(describing: defaultLocation["config.valid"]))")

        // Root's 0600 file, read by nobody.
        let shared = "/tmp/devtrust-doctor-config-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(shared, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared)
        _ = FileManager.default.createFile(atPath: shared + "/config.json", contents: Data("{}".utf8), attributes: [.posixPermissions: 0o600])
        var nobody = NobodyRunner(binary: binary, keystore: shared + "/ks", tcti: "device:/nonexistent")
        nobody.extraEnvironment["DEVTRUST_CONFIG"] = shared + "/config.json"
        let (_, unreadable) = try DoctorTests.doctor(nobody)
        let fix = Self.fix(unreadable["config.valid"])
        #expect(fix.hasPrefix("it belongs to root (uid 0), and you may not read it: its owner makes it readable for everyone (sudo chmod a+r \(shared)/config.json")
                && !fix.contains("chmod u+r"), "\(fix)")
    }

    /// libcurl too old (a stand-in reporting 7.52.0): library.libcurl warns as the loader refuses it
    /// (it passed on dlopen alone); the clock checks are not made, and say why.
    @Test(.enabled(if: ExternalTool.cc.shouldRun)) func aLibcurlTooOldIsWhatTheLibraryCheckSays() throws {
        let stub = TemporaryDirectory("old-libcurl")
        let source = stub.write("curl.c", """
            #include <curl/curl.h>
            static curl_version_info_data data = { .age = CURLVERSION_NOW, .version = "7.52.0", .version_num = 0x073400 };
            curl_version_info_data *curl_version_info(CURLversion age) { (void)age; return &data; }

            """)
        let built = try ProcessRunner.run(ExternalTool.cc.rawValue, ["-shared", "-fPIC", "-o", stub.file("libcurl.so.4"), source])
        #expect(built.status == 0, "\(built)")
        var device = try DeviceFixture<DevtrustBinary>()
        try Self.addRegistrations(device.directory.file("ks"), servers: ["http://127.0.0.1:9"])
        device.cli.extraEnvironment["LD_LIBRARY_PATH"] = stub.path
        let (result, checks) = try DoctorTests.doctor(device.cli)
        #expect(result.status == 0, "\(result)")
        let curl = checks["library.libcurl"]
        #expect(Self.verdict(curl) == "warn" && Self.detail(curl).hasPrefix("libcurl.so.4 is libcurl 7.52.0, too old: devtrust needs 7.63.0 or later"),
                "\(String(describing: curl))")
        #expect(Self.fix(curl) == "install a newer libcurl4 (7.63.0 or later)")
        let clock = checks["clock.http://127.0.0.1:9"]
        #expect(Self.verdict(clock) == "skip" && Self.detail(clock).contains("(see library.libcurl)"), "\(String(describing: clock))")
    }

    /// The report's marks in colour when stdout is a terminal, plain otherwise or with NO_COLOR.
    @Test func theVerdictMarksAreColouredOnATerminalOnly() throws {
        let device = try DeviceFixture<DevtrustBinary>()
        let session = try ColourAndProgressTests.onTerminal(device.cli, ["doctor"])
        #expect(session.exit == 0 && session.transcript.contains(ColourAndProgressTests.green + "[pass]" + ColourAndProgressTests.reset + " config.valid: "),
                "\(session.transcript.debugDescription)")
        let noColour = try ColourAndProgressTests.onTerminal(device.cli, ["doctor"], environment: ["NO_COLOR": "1"])
        #expect(noColour.exit == 0 && !noColour.transcript.contains("\u{1B}") && noColour.transcript.contains("[pass] config.valid: "),
                "\(noColour.transcript.debugDescription)")
        let file = device.directory.file("report.txt")
        let redirected = try ColourAndProgressTests.onTerminal(device.cli, ["doctor"], stdoutTo: file)
        let written = String(decoding: device.directory.read("report.txt") ?? [], as: UTF8.self)
        #expect(redirected.exit == 0 && written.hasPrefix("[pass] config.valid: ") && !written.contains("\u{1B}"), "\(written.debugDescription)")
    }
}

/// The binary copied where other users can run it, run under setpriv with `privileges`
/// (`--reuid`, `--regid`, `--groups` or `--clear-groups`).
struct SetprivRunner: DevtrustRunner {
    let binary: String
    let keystore: String
    let privileges: [String]
    var extraEnvironment: [String: String] = [:]

    init(binary: String, keystore: String, tcti: String, privileges: [String]) {
        self.binary = binary
        self.keystore = keystore
        self.privileges = privileges
        extraEnvironment["DEVTRUST_TCTI"] = tcti
    }

    func run(_ arguments: [String], stdin: [UInt8]?) throws -> ProcessResult {
        try ProcessRunner.run("/usr/bin/setpriv", privileges + [binary] + arguments, environment: environment, stdin: stdin)
    }
}

/// The binary killed after 120 s: a command that hangs fails its test (exit 137) instead of hanging the run.
struct TimeLimitedRunner: DevtrustRunner {
    var binary: DevtrustBinary

    init(_ binary: DevtrustBinary) {
        self.binary = binary
    }

    var keystore: String { binary.keystore }
    var extraEnvironment: [String: String] {
        get { binary.extraEnvironment }
        set { binary.extraEnvironment = newValue }
    }

    func run(_ arguments: [String], stdin: [UInt8]?) throws -> ProcessResult {
        try ProcessRunner.run("/usr/bin/timeout", ["-s", "KILL", "120", binary.path] + arguments, environment: environment, stdin: stdin)
    }
}
