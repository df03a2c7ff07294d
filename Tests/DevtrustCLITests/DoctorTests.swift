import DevtrustDevice
import DevtrustEncoding
import DevtrustTestSupport
import DevtrustURL
import Foundation
import Glibc
import Testing

/// `devtrust doctor`, through the binary: each trap a support engineer looks
/// for (an unreachable TPM, a device node the user may not open, an exposed or
/// corrupt keystore, a wrong clock, a missing library, a broken configuration)
/// gives its check's verdict and fix, and the exit code says whether any failed.
@Suite(.enabled(if: ExternalTool.python.shouldRun)) struct DoctorTests {
    /// The checks every run makes, whatever the machine; `clock.<origin>` come on top, one per server.
    static let fixedIDs = ["config.valid", "keystore.permissions", "key.signs", "tpm.reachable", "tpm.device-permissions", "tpm.group",
                           "library.tss2-esys", "library.tcti", "library.libcurl", "library.libqrencode"]

    /// `doctor --json` run, its document read by python3's json module: one object
    /// `{"ok", "checks"}` whose checks each have exactly an id, a title, a verdict, a
    /// detail and a fix (null on a pass, a text on a warning or a failure); `ok` and the
    /// exit code (0, or 1 with the error object on stderr) say the same: whether one failed.
    static func doctor<CLI: DevtrustRunner>(_ cli: CLI, _ extra: [String] = []) throws -> (result: ProcessResult, checks: [String: JSONObject]) {
        let result = try cli.run(["doctor", "--json"] + extra, stdin: nil)
        let document = try JSONOutputTests.independentlyParsed(result.stdout)
        #expect(document.keys == ["ok", "checks"], "\(document)")
        var checks = [String: JSONObject]()
        for element in document["checks"]?.arrayValue ?? [] {
            let check = try #require(element.objectValue, "\(element)")
            #expect(check.keys == ["id", "title", "verdict", "detail", "fix"], "\(check)")
            let id = try #require(check["id"]?.stringValue)
            #expect(checks[id] == nil, "\(id) twice")
            let verdict = check["verdict"]?.stringValue ?? ""
            #expect(["pass", "warn", "fail", "skip"].contains(verdict), "\(check)")
            #expect(check["title"]?.stringValue?.isEmpty == false && check["detail"]?.stringValue?.isEmpty == false, "\(check)")
            if verdict == "pass" { #expect(check["fix"] == .null, "\(check)") }
            // Parts joined as sentences, not "….; …".
            let detail = check["detail"]?.stringValue ?? ""
            #expect(!detail.contains(".;"), "\(check)")
            if verdict == "warn" || verdict == "fail" { #expect(check["fix"]?.stringValue?.isEmpty == false, "\(check)") }
            checks[id] = check
        }
        for id in fixedIDs { #expect(checks[id] != nil, "no check \(id): \(checks.keys.sorted())") }
        let failed = checks.values.contains { $0["verdict"] == .string("fail") }
        #expect(document["ok"] == .bool(!failed), "\(document)")
        if failed {
            let error = try JSONOutputTests.errorObject(result, stdoutEmpty: false)
            #expect(error["exitCode"] == .integer(1) && error["message"]?.stringValue?.contains("checks failed") == true, "\(error)")
        } else {
            #expect(result.status == 0 && result.stderr.isEmpty, "\(result)")
        }
        return (result, checks)
    }

    static func verdict(_ check: JSONObject?) -> String? { check?["verdict"]?.stringValue }
    static func detail(_ check: JSONObject?) -> String { check?["detail"]?.stringValue ?? "" }
    static func fix(_ check: JSONObject?) -> String { check?["fix"]?.stringValue ?? "" }

    /// A software key registered with a server whose clock is right: nothing fails, the TPM
    /// checks skip (no TPM, and the key needs none), and the keystore is left as it was.
    @Test func aRegisteredSoftwareKeyPassesEveryCheckThatApplies() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>(register: true)
        let origin = Origin.text(of: setup.server.url)
        let before = try ReadOnlyCommandTests.fingerprint(setup.directory.file("ks"))
        let (result, checks) = try Self.doctor(setup.cli)
        #expect(result.status == 0, "\(result)")
        #expect(Set(checks.keys) == Set(Self.fixedIDs + ["clock." + origin]), "\(checks.keys.sorted())")
        for id in ["config.valid", "keystore.permissions", "key.signs", "library.tss2-esys", "library.tcti", "library.libcurl", "library.libqrencode", "clock." + origin] {
            #expect(Self.verdict(checks[id]) == "pass", "\(id): \(String(describing: checks[id]))")
        }
        for id in ["tpm.reachable", "tpm.device-permissions", "tpm.group"] {
            #expect(Self.verdict(checks[id]) == "skip" && Self.detail(checks[id]).contains("/nonexistent"), "\(id): \(String(describing: checks[id]))")
        }
        #expect(Self.detail(checks["tpm.reachable"]).contains("the software key needs none"))
        #expect(Self.detail(checks["key.signs"]).contains("software key") && Self.detail(checks["clock." + origin]).contains(setup.server.url))

        let human = try setup.cli.run("doctor")
        #expect(human.status == 0 && human.stderr.isEmpty, "\(human)")
        let lines = human.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == checks.count + 1 && lines.last == Optional("11 checks: 8 pass, 0 warn, 0 fail, 3 skip"), "\(human.stdout)")
        for id in checks.keys {
            #expect(lines.contains { $0.hasPrefix("[\(Self.verdict(checks[id])!)] \(id): ") }, "\(id): \(human.stdout)")
        }
        #expect(try ReadOnlyCommandTests.fingerprint(setup.directory.file("ks")) == before)
    }

    /// A key in the TPM: every TPM check passes or does not apply (swtpm is no device);
    /// once the TPM is gone, reaching it and the key fail with the fix, and doctor exits 1.
    @Test(.enabled(if: Swtpm.shouldRun)) func aTPMKeyFailsWithTheFixOnceTheTPMStops() throws {
        let setup = try SwtpmDeviceFixture()
        let initialized = try setup.cli.run("init", "--backend", "tpm", "-q")
        #expect(initialized.status == 0, "\(initialized)")
        let (healthy, checks) = try Self.doctor(setup.cli)
        #expect(healthy.status == 0, "\(healthy)")
        #expect(Self.verdict(checks["tpm.reachable"]) == "pass" && Self.detail(checks["tpm.reachable"]).contains("a TPM answers at \(setup.tpm.tcti)"),
                "\(String(describing: checks["tpm.reachable"]))")
        #expect(Self.verdict(checks["key.signs"]) == "pass" && Self.detail(checks["key.signs"]).contains("tpm key"), "\(String(describing: checks["key.signs"]))")
        #expect(Self.verdict(checks["library.tcti"]) == "pass" && Self.detail(checks["library.tcti"]).contains("libtss2-tcti-swtpm.so.0"))
        for id in ["tpm.device-permissions", "tpm.group"] {
            #expect(Self.verdict(checks[id]) == "skip" && Self.detail(checks[id]).contains("opens no device node"), "\(id): \(String(describing: checks[id]))")
        }

        setup.tpm.stop()
        let (stopped, after) = try Self.doctor(setup.cli)
        #expect(stopped.status == 1, "\(stopped)")
        #expect(Self.verdict(after["tpm.reachable"]) == "fail", "\(String(describing: after["tpm.reachable"]))")
        #expect(Self.detail(after["tpm.reachable"]) == "no TPM at \(setup.tpm.tcti) (nothing answers)" && Self.fix(after["tpm.reachable"]) == "start the simulator, or fix host and port",
                "\(String(describing: after["tpm.reachable"]))")
        #expect(Self.verdict(after["key.signs"]) == "fail" && Self.fix(after["key.signs"]) == "start the simulator, or fix host and port",
                "\(String(describing: after["key.signs"]))")
        #expect(stopped.stderr.contains("2 of 11 checks failed (key.signs, tpm.reachable)"), "\(stopped.stderr)")
    }

    /// Run as nobody against a device node only root and group tss may open: the node's
    /// mode and group, and the fix (join group tss); with a TPM key a failure, with a
    /// software key a warning.
    @Test(.enabled(if: getuid() == 0 && getgrnam("tss") != nil && Swtpm.shouldRun)) func aDeviceOnlyGroupTssMayOpenNamesTheGroupAndTheFix() throws {
        let shared = "/tmp/devtrust-doctor-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(shared, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        // A character device (/dev/null's numbers) that only root and group tss may open.
        let node = shared + "/tpmrm0"
        // dev_t for major 1, minor 3 (makedev is a macro Swift cannot call).
        guard mknod(node, mode_t(S_IFCHR) | 0o660, dev_t(1 << 8 | 3)) == 0 else { throw FixtureError("mknod \(node): \(String(cString: strerror(errno)))") }
        chown(node, 0, getgrnam("tss")!.pointee.gr_gid)
        chmod(node, 0o660)
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared)

        let tpm = try Swtpm()
        var keystores = [(name: String, tpmKey: Bool)]()
        for (name, arguments) in [("tpm-ks", ["init", "--backend", "tpm", "-q"]), ("software-ks", ["init", "--backend", "software", "-q"])] {
            var root = DevtrustBinary(keystore: shared + "/" + name)
            root.extraEnvironment["DEVTRUST_TCTI"] = tpm.tcti
            let created = try root.run(arguments)
            #expect(created.status == 0, "\(created)")
            for path in [shared + "/" + name] + (try FileManager.default.subpathsOfDirectory(atPath: shared + "/" + name)).map({ shared + "/" + name + "/" + $0 }) {
                chown(path, 65534, 65534)
            }
            keystores.append((name, name == "tpm-ks"))
        }
        for (name, tpmKey) in keystores {
            let nobody = NobodyRunner(binary: binary, keystore: shared + "/" + name, tcti: "device:" + node)
            let (result, checks) = try Self.doctor(nobody)
            let expected = tpmKey ? "fail" : "warn"
            #expect(result.status == (tpmKey ? 1 : 0), "\(name): \(result)")
            let permissions = checks["tpm.device-permissions"]
            #expect(Self.verdict(permissions) == expected, "\(name): \(String(describing: permissions))")
            #expect(Self.detail(permissions) == "\(node) (crw-rw---- root:tss) does not open read-write for you (nobody, uid 65534)", "\(String(describing: permissions))")
            #expect(Self.fix(permissions) == "sudo usermod -aG tss nobody, then log out and back in", "\(String(describing: permissions))")
            let group = checks["tpm.group"]
            #expect(Self.verdict(group) == expected && Self.detail(group) == "you (nobody, uid 65534) are not in group tss, whose members may open \(node)",
                    "\(name): \(String(describing: group))")
            #expect(Self.fix(group) == "sudo usermod -aG tss nobody, then log out and back in", "\(String(describing: group))")
            #expect(Self.verdict(checks["tpm.reachable"]) == expected && Self.detail(checks["tpm.reachable"]).contains("(permission denied)"),
                    "\(name): \(String(describing: checks["tpm.reachable"]))")
            #expect(Self.verdict(checks["key.signs"]) == (tpmKey ? "fail" : "pass"), "\(name): \(String(describing: checks["key.signs"]))")
            #expect(Self.verdict(checks["keystore.permissions"]) == "pass", "\(name): \(String(describing: checks["keystore.permissions"]))")
        }
    }

    /// A keystore directory others can read, then a key file others can read: each is
    /// refused by the other commands, so a failure here with the chmod that fixes it.
    @Test func aKeystoreOthersCanReadFailsWithTheChmodFix() throws {
        let device = try DeviceFixture<DevtrustBinary>()
        let keystore = device.directory.file("ks")
        chmod(keystore, 0o755)
        let (open, checks) = try Self.doctor(device.cli)
        #expect(open.status == 1, "\(open)")
        let permissions = checks["keystore.permissions"]
        #expect(Self.verdict(permissions) == "fail" && Self.detail(permissions).contains("\(keystore) is mode 0755: group or others have access; devtrust refuses it"),
                "\(String(describing: permissions))")
        #expect(Self.fix(permissions) == "chmod 700 \(keystore)", "\(String(describing: permissions))")
        #expect(Self.verdict(checks["key.signs"]) == "fail" && Self.fix(checks["key.signs"]) == "fix keystore.permissions first",
                "\(String(describing: checks["key.signs"]))")

        let human = try device.cli.run("doctor")
        #expect(human.status == 1 && human.stderr.contains("devtrust: error: 2 of 11 checks failed (keystore.permissions, key.signs); each has its fix above"), "\(human)")
        #expect(human.stdout.contains("[FAIL] keystore.permissions: \(keystore) is mode 0755: ") && human.stdout.contains("\n       fix: chmod 700 \(keystore)\n"),
                "\(human.stdout)")

        chmod(keystore, 0o700)
        let keyFile = keystore + "/" + device.directory.entries("ks").first { $0.hasPrefix("key-") }!
        chmod(keyFile, 0o644)
        let (_, fileChecks) = try Self.doctor(device.cli)
        #expect(Self.verdict(fileChecks["keystore.permissions"]) == "fail" && Self.fix(fileChecks["keystore.permissions"]) == "chmod 600 \(keyFile)",
                "\(String(describing: fileChecks["keystore.permissions"]))")
    }

    /// A keystore.json that is not JSON: the keystore and key checks fail with the way out
    /// (reset moves it aside), and every other check still runs.
    @Test func aCorruptKeystoreFailsAndTheOtherChecksStillRun() throws {
        let device = try DeviceFixture<DevtrustBinary>()
        device.directory.write("ks/keystore.json", "{\"version\": 2, \"key\": ")
        let (result, checks) = try Self.doctor(device.cli)
        #expect(result.status == 1, "\(result)")
        let permissions = checks["keystore.permissions"]
        #expect(Self.verdict(permissions) == "fail" && Self.detail(permissions).contains("keystore.json is corrupt"), "\(String(describing: permissions))")
        #expect(Self.fix(permissions).contains("`devtrust reset --yes` moves the keystore aside"), "\(String(describing: permissions))")
        #expect(Self.verdict(checks["key.signs"]) == "fail", "\(String(describing: checks["key.signs"]))")
        for id in ["config.valid", "library.tss2-esys", "library.tcti", "library.libcurl", "library.libqrencode"] {
            #expect(Self.verdict(checks[id]) == "pass", "\(id): \(String(describing: checks[id]))")
        }
        #expect(Self.verdict(checks["tpm.reachable"]) == "skip" && Self.verdict(checks["clock"]) == "skip", "\(checks)")
    }

    /// The server's clock 10 minutes ahead: tokens from this machine are too old there.
    /// The check names the server and the difference, and the fix.
    @Test func aServerTenMinutesAheadFailsTheClockCheck() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>(["--clock-offset", "600"], register: true)
        let origin = Origin.text(of: setup.server.url)
        let (result, checks) = try Self.doctor(setup.cli)
        #expect(result.status == 1, "\(result)")
        let clock = checks["clock." + origin]
        #expect(Self.verdict(clock) == "fail", "\(String(describing: clock))")
        let detail = Self.detail(clock)
        let prefix = "this machine's clock is "
        let seconds = detail.hasPrefix(prefix) ? Int(detail.dropFirst(prefix.count).prefix { $0.isNumber }) : nil
        #expect(seconds.map { (595...605).contains($0) } == true, "\(detail)")
        #expect(detail.contains(" s behind \(setup.server.url)'s (its Date header): the server drops device tokens older than 5 minutes"), "\(detail)")
        #expect(Self.fix(clock) == "set the clock right: `timedatectl set-ntp true` (NTP), then check `timedatectl status`")
    }

    /// A server whose GET answers come from a cache (a Date 10 minutes old, with Age): its
    /// clock is the Date plus the Age, which agrees with this one.
    @Test func aCachedAnswerCountsWithItsAge() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>(["--cached-gets", "600"], register: true)
        let (result, checks) = try Self.doctor(setup.cli)
        let clock = checks["clock." + Origin.text(of: setup.server.url)]
        #expect(result.status == 0 && Self.verdict(clock) == "pass", "\(String(describing: clock))")
    }

    /// A server that does not answer is a warning with the network error, not a failure.
    @Test func anUnreachableServerIsAWarning() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>(register: true)
        setup.server.stop()
        let (result, checks) = try Self.doctor(setup.cli)
        let clock = checks["clock." + Origin.text(of: setup.server.url)]
        #expect(result.status == 0 && Self.verdict(clock) == "warn", "\(result)")
        #expect(Self.detail(clock).contains("did not answer") && Self.detail(clock).contains("cannot connect"), "\(String(describing: clock))")
    }

    /// libqrencode hidden: a warning that says what is lost and what to install; nothing fails.
    @Test(.enabled(if: HiddenLibrary.isPossible("libqrencode.so.4"))) func withoutLibqrencodeTheLibraryCheckWarns() throws {
        let scratch = TemporaryDirectory()
        var cli = HiddenLibrary.devtrust(hiding: "libqrencode.so.4", in: scratch)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        let (result, checks) = try Self.doctor(cli)
        #expect(result.status == 0, "\(result)")
        let qrencode = checks["library.libqrencode"]
        #expect(Self.verdict(qrencode) == "warn" && Self.detail(qrencode).hasPrefix("cannot load libqrencode.so.4: "), "\(String(describing: qrencode))")
        #expect(Self.detail(qrencode).hasSuffix("login --device-code shows the code and its URL without a QR code"))
        #expect(Self.fix(qrencode) == "sudo apt-get install libqrencode4")
        #expect(Self.verdict(checks["library.libcurl"]) == "pass" && Self.verdict(checks["key.signs"]) == "pass", "\(checks)")
    }

    /// tpm2-tss hidden: a warning with a software key (which works without it), with the packages to install.
    @Test(.enabled(if: HiddenLibrary.isPossible("libtss2-esys.so.0"))) func withoutTheTSSASoftwareKeyGetsAWarning() throws {
        let scratch = TemporaryDirectory()
        var cli = HiddenLibrary.devtrust(hiding: "libtss2-esys.so.0", in: scratch)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        let (result, checks) = try Self.doctor(cli)
        #expect(result.status == 0, "\(result)")
        let tss = checks["library.tss2-esys"]
        #expect(Self.verdict(tss) == "warn" && Self.detail(tss).hasPrefix("cannot load libtss2-esys.so.0: "), "\(String(describing: tss))")
        #expect(Self.detail(tss).hasSuffix("devtrust can use no TPM (software keys work)"))
        #expect(Self.fix(tss) == "sudo apt-get install libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-mu0 libtss2-rc0")
    }

    /// A configuration file with a syntax error fails the check naming the line (doctor itself
    /// still runs every check and exits 1, not 2); one with a misspelt field names the field.
    @Test func aBrokenConfigurationFileFailsNamingTheLine() throws {
        var device = try DeviceFixture<DevtrustBinary>()
        let file = device.directory.write("config.json", "{\n  \"platform\": \"linux\",\n  \"inventory\": tru\n}\n")
        device.cli.extraEnvironment["DEVTRUST_CONFIG"] = file
        let (result, checks) = try Self.doctor(device.cli)
        #expect(result.status == 1, "\(result)")
        let config = checks["config.valid"]
        #expect(Self.verdict(config) == "fail" && Self.detail(config).hasPrefix("configuration file \(file) is not valid JSON: "), "\(String(describing: config))")
        #expect(Self.detail(config).hasSuffix("(line 3, column 16)"), "\(String(describing: config))")
        // A file DEVTRUST_CONFIG names is not moved aside: without it, every command fails.
        #expect(Self.fix(config) == "correct line 3 of \(file) (docs/configuration.md), or stop naming it (--config, DEVTRUST_CONFIG)")
        #expect(Self.verdict(checks["key.signs"]) == "pass", "\(String(describing: checks["key.signs"]))")

        device.directory.write("config.json", #"{"platfrom": "linux"}"#)
        let (_, misspelt) = try Self.doctor(device.cli)
        #expect(Self.verdict(misspelt["config.valid"]) == "fail" && Self.fix(misspelt["config.valid"]).hasPrefix("correct \"platfrom\" in \(file)"),
                "\(String(describing: misspelt["config.valid"]))")
    }
}

/// The binary copied where nobody can run it, run as nobody (uid and gid 65534, no supplementary groups).
struct NobodyRunner: DevtrustRunner {
    let binary: String
    let keystore: String
    var extraEnvironment: [String: String] = [:]

    init(binary: String, keystore: String, tcti: String) {
        self.binary = binary
        self.keystore = keystore
        extraEnvironment["DEVTRUST_TCTI"] = tcti
    }

    func run(_ arguments: [String], stdin: [UInt8]?) throws -> ProcessResult {
        try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments,
                              environment: environment, stdin: stdin)
    }
}
