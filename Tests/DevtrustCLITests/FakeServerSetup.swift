import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// The fast tier's device: a software key in a keystore of its own, and devtrust run in this process
/// (`InProcessCLI`) against an in-process identity server (`FakeIdentityServer`), on virtual time
/// (`VirtualTime`: its clock, its waits, the boot clock the `Date` headers are compared with), with
/// the posture read below an empty tree (nothing is run: not the firewall's `nft` as root). No
/// process is started, no socket opened, nothing sleeps. The same commands against the reference
/// server over loopback HTTP, swtpm and real time are `make test`'s (RegisterTests, ClockSkewTests,
/// DeviceCodeTests, SignInTests, ...).
struct FakeServerSetup {
    let time: VirtualTime
    let server: FakeIdentityServer
    var device: DeviceFixture<InProcessCLI>

    var directory: TemporaryDirectory { device.directory }
    var cli: InProcessCLI {
        get { device.cli }
        set { device.cli = newValue }
    }

    /// GNOME in the posture tree, with its screen lock on or off (the dconf databases of
    /// DevtrustPostureTests' fixtures): what devtrust then measures as `lockScreen`, a claim no
    /// `--claim` or configuration can set.
    func measuresLockScreen(_ on: Bool) throws {
        let root = cli.postureRoot
        let configHome = try #require(cli.environment["XDG_CONFIG_HOME"])
        let database = try #require(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/lock-\(on ? "on" : "off").gvdb")))
        for (path, contents) in [("/usr/bin/gnome-shell", Data()), (configHome + "/dconf/user", database)] {
            try FileManager.default.createDirectory(atPath: root + (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: root + path, contents: contents))
        }
    }

    /// - Parameters:
    ///   - settings: the server's.
    ///   - softwareKey: whether to create a software device key first (`init --backend software`).
    ///   - register: whether to register the device then (non-interactively, quietly).
    init(_ settings: FakeIdentityServer.Settings = .init(), softwareKey: Bool = true, register: Bool = false) throws {
        let time = VirtualTime()
        let server = try FakeIdentityServer(time: time, settings)
        self.time = time
        self.server = server
        device = try DeviceFixture({ keystore in
            var cli = InProcessCLI(keystore: keystore)
            cli.clock = time
            cli.waiting = time
            cli.bootClock = { BootClockReading(wall: time.seconds, raw: time.seconds - 1_000_000, bootID: "fast-tier-boot") }
            cli.httpTransport = { server.transport($0) }
            cli.postureRoot = keystore + "-posture-root"
            return cli
        }, softwareKey: softwareKey)
        if register {
            let registered = try self.register(["-q"])
            guard registered.status == 0 else { throw FixtureError("devtrust register failed: \(registered)") }
        }
    }

    var url: String { server.base }

    @discardableResult
    func run(_ arguments: String..., stdin: String? = nil) throws -> ProcessResult {
        try cli.run(arguments, stdin: stdin.map { Array($0.utf8) })
    }

    func run(_ arguments: [String]) throws -> ProcessResult {
        try cli.run(arguments, stdin: nil)
    }

    /// `devtrust register` with the server, non-interactively, with `answers` and then `extra`.
    func register(_ extra: [String] = [], answers: [String] = FakeIdentityServer.registrationAnswers) throws -> ProcessResult {
        try run(["register", "--server", url, "--non-interactive"] + answers + extra)
    }

    /// `devtrust login --device-code` with the server, `--json`: its events on stdout, one a line.
    func deviceCodeLogin(_ extra: [String] = []) throws -> (result: ProcessResult, events: [JSONObject]) {
        let result = try run(["login", "--device-code", "--server", url, "--client-id", FakeIdentityServer.clientID, "--json"] + extra)
        let events = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue }
        return (result, events)
    }

    /// The device's key answering as a key in a TPM in `trouble` does, from the next command on.
    mutating func tpm(failing trouble: TPMError) {
        cli.keyInUse = { TroubledTPMKey($0, failing: trouble) }
    }

    func registrations() throws -> [JSONObject] { try device.registrations().compactMap(\.objectValue) }
    func status() throws -> JSONObject { try device.status() }

    /// `devtrust pubkey`: what `register` must have sent as `publicKey`.
    func publicKey() throws -> String { try run("pubkey").output }

    /// The header and claims of a compact JWS, read (not verified).
    static func parts(_ token: String) throws -> (header: JSONObject, claims: JSONObject) {
        let jws = try ParsedJWS(compact: token)
        return (jws.header, try jws.claims())
    }
}
