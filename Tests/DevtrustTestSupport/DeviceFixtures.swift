import DevtrustEncoding

/// A setup step of a fixture that did not work (the test cannot go on).
public struct FixtureError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A private directory with a keystore path in it (`ks`) and a devtrust to run
/// against it, where no TPM answers: DEVTRUST_TCTI names a device that does
/// not exist. `CLI` is the built binary or the command line in-process.
public struct DeviceFixture<CLI: DevtrustRunner> {
    public let directory = TemporaryDirectory()
    public var cli: CLI

    /// - Parameter softwareKey: whether to create a software device key first (`init --backend software`).
    public init(_ makeCLI: (_ keystore: String) -> CLI, softwareKey: Bool = true) throws {
        cli = makeCLI(directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        if softwareKey {
            let created = try cli.run("init", "--backend", "software", "-q")
            guard created.status == 0 else { throw FixtureError("devtrust init failed: \(created)") }
        }
    }

    /// The keystore's manifest as stored, or nil when there is none.
    public func manifest() -> [UInt8]? { directory.read("ks/keystore.json") }

    /// The registrations the manifest records.
    public func registrations() throws -> [JSONValue] {
        guard let manifest = manifest() else { throw FixtureError("there is no keystore.json") }
        return try JSONParser.parse(manifest).objectValue?["registrations"]?.arrayValue ?? []
    }

    /// `devtrust status --json`.
    public func status() throws -> JSONObject {
        try JSONParser.parse(try cli.run("status", "--json").output).objectValue ?? [:]
    }
}

extension DeviceFixture where CLI == DevtrustBinary {
    public init(softwareKey: Bool = true) throws {
        try self.init({ DevtrustBinary(keystore: $0) }, softwareKey: softwareKey)
    }
}

/// A DeviceFixture and a reference server of its own; the device registered with it when asked.
public struct ReferenceServerFixture<CLI: DevtrustRunner> {
    public var device: DeviceFixture<CLI>
    public let server: ReferenceServer

    public var directory: TemporaryDirectory { device.directory }
    public var cli: CLI {
        get { device.cli }
        set { device.cli = newValue }
    }

    /// - Parameters:
    ///   - serverArguments: reference_server.py options.
    ///   - softwareKey: whether to create a software device key first.
    ///   - register: whether to register the device then (non-interactively, quietly).
    public init(_ makeCLI: (_ keystore: String) -> CLI, serverArguments: [String] = [], softwareKey: Bool = true, register: Bool = false) throws {
        server = try ReferenceServer(serverArguments)
        device = try DeviceFixture(makeCLI, softwareKey: softwareKey)
        if register {
            let registered = try self.register(["-q"])
            guard registered.status == 0 else { throw FixtureError("devtrust register failed: \(registered)") }
        }
    }

    /// `devtrust register` with the server, non-interactively, with `answers` and then `extra`.
    public func register(_ extra: [String] = [], answers: [String] = ReferenceServer.registrationAnswers, stdin: String? = nil) throws -> ProcessResult {
        try cli.run(["register", "--server", server.url, "--non-interactive"] + answers + extra, stdin: stdin.map { Array($0.utf8) })
    }

    public func manifest() -> [UInt8]? { device.manifest() }
    public func registrations() throws -> [JSONValue] { try device.registrations() }
    public func status() throws -> JSONObject { try device.status() }

    /// The sign-ins the server recorded (whether each carried a device token, and was accepted).
    public func signInRecords() throws -> [JSONObject] {
        try server.get("/api/signin-records").arrayValue?.compactMap(\.objectValue) ?? []
    }

    /// What the server's device check says of a device token.
    public func deviceCheck(_ token: String) throws -> JSONObject {
        try server.get("/api/device-check", headers: ["X-Device-Token": token]).objectValue ?? [:]
    }
}

extension ReferenceServerFixture where CLI == DevtrustBinary {
    public init(_ serverArguments: [String] = [], softwareKey: Bool = true, register: Bool = false) throws {
        try self.init({ DevtrustBinary(keystore: $0) }, serverArguments: serverArguments, softwareKey: softwareKey, register: register)
    }
}

extension ReferenceServer {
    /// What the reference server's registration flow asks for, as `--input` options.
    public static let registrationAnswers = ["--input", "http://wso2.com/claims/emailaddress=alice@example.com", "--input", "password=correct horse",
                                             "--input", "otp=123456"]
    /// What its app-native sign-in asks for with the basic authenticator.
    public static let signInAnswers = ["--authenticator", "BasicAuthenticator", "--input", "username=alice@example.com", "--input", "password=correct horse"]
}

/// A private directory with a keystore path in it (`ks`) and the built binary
/// pointed at a private swtpm (the TPM backend needs the real TCTI loading).
public struct SwtpmDeviceFixture {
    public let directory = TemporaryDirectory()
    public let tpm: Swtpm
    public let cli: DevtrustBinary

    /// - Parameter tpm: a TPM another fixture already uses; a new swtpm by default.
    public init(tpm: Swtpm? = nil) throws {
        self.tpm = try tpm ?? Swtpm()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = self.tpm.tcti
        self.cli = cli
    }

    /// keystore.json, parsed.
    public func manifest() throws -> JSONObject {
        guard let manifest = directory.read("ks/keystore.json"), let document = try JSONParser.parse(manifest).objectValue else {
            throw FixtureError("there is no keystore.json, or it is not an object")
        }
        return document
    }

    /// The path of the key file (`key-*`) in the keystore.
    public func keyFilePath() throws -> String {
        guard let name = directory.entries("ks").first(where: { $0.hasPrefix("key-") }) else { throw FixtureError("the keystore has no key file") }
        return directory.file("ks/" + name)
    }

    /// `devtrust status --json`.
    public func status() throws -> JSONObject {
        guard let document = try JSONParser.parse(try cli.run("status", "--json").output).objectValue else {
            throw FixtureError("status --json did not print an object")
        }
        return document
    }
}
