import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// A keystore edited by hand or by someone else, and configuration files others
/// can change: a clear error (exit 7 for the keystore, 2 for the
/// configuration), never a crash, nothing changed, and no symlink followed.
/// In-process (a crash there ends the whole test run); the binary checks that
/// the process ends with exit 7, not a signal, for every damage.
@Suite struct HostileLocalInputTests {
    struct Damage: Sendable, CustomTestStringConvertible {
        let name: String
        let message: String
        let apply: @Sendable (_ keystore: String, _ keyFile: String) throws -> Void
        var testDescription: String { name }
    }

    static let marker = "victim-marker-\(UInt32.random(in: 0...UInt32.max))"
    /// Another user's file, outside the keystore: what a planted symlink points at.
    static func victim(_ keystore: String) -> String { keystore + "-victim" }

    static func editManifest(_ keystore: String, _ edit: (inout JSONObject) -> Void) throws {
        let path = keystore + "/keystore.json"
        var document = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path)))).objectValue ?? [:]
        edit(&document)
        try Data(JSONWriter.bytes(.object(document))).write(to: URL(fileURLWithPath: path))
    }

    static func replace(_ path: String, with contents: String) throws {
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
    }

    static func plantSymlink(_ path: String, keystore: String) {
        unlink(path)
        symlink(victim(keystore), path)
    }

    static let damages: [Damage] = [
        Damage(name: "garbage manifest", message: "keystore.json is corrupt: not valid JSON (invalid literal at byte 0)") { keystore, _ in
            try replace(keystore + "/keystore.json", with: "not json at all")
        },
        Damage(name: "empty manifest", message: "keystore.json is corrupt: not valid JSON (unexpected end of input at byte 0)") { keystore, _ in
            try replace(keystore + "/keystore.json", with: "")
        },
        Damage(name: "version as a string", message: "field \"version\" must be an integer, found a string") { keystore, _ in
            try editManifest(keystore) { $0["version"] = .string("1") }
        },
        Damage(name: "key record a number", message: "field \"key\" must be an object") { keystore, _ in
            try editManifest(keystore) { $0["key"] = .integer(42) }
        },
        Damage(name: "key file outside the keystore", message: "must be a file name inside the keystore, not \"../../etc/passwd\"") { keystore, _ in
            try editManifest(keystore) { manifest in
                var key = manifest["key"]?.objectValue ?? [:]
                key["file"] = .string("../../etc/passwd")
                manifest["key"] = .object(key)
            }
        },
        Damage(name: "registrations an object", message: "field \"registrations\" must be an array") { keystore, _ in
            try editManifest(keystore) { $0["registrations"] = .object([:]) }
        },
        Damage(name: "manifest of 20 MB", message: "larger than any keystore file") { keystore, _ in
            try replace(keystore + "/keystore.json", with: String(repeating: " ", count: 20_000_000))
        },
        Damage(name: "key file missing", message: "named by the keystore is missing; the device key is lost (unless you have a copy of that file: put it back): `devtrust init --force` makes a new one") { keystore, keyFile in
            unlink(keystore + "/" + keyFile)
        },
        Damage(name: "key file garbage", message: "not a PKCS#8 P-256 private key: PrivateKeyInfo: expected tag 0x30") { keystore, keyFile in
            try replace(keystore + "/" + keyFile, with: "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
        },
        Damage(name: "key file another P-256 key", message: "is not the one keystore.json records") { keystore, keyFile in
            _ = try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keystore + "/" + keyFile])
            chmod(keystore + "/" + keyFile, 0o600)
        },
        Damage(name: "key file a P-384 key", message: "not a PKCS#8 P-256 private key: a key on P-384") { keystore, keyFile in
            _ = try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", keystore + "/" + keyFile])
            chmod(keystore + "/" + keyFile, 0o600)
        },
        Damage(name: "key file a symlink to another user's file", message: "is not a regular file (a symlink or device?); devtrust refuses to follow it") { keystore, keyFile in
            plantSymlink(keystore + "/" + keyFile, keystore: keystore)
        },
        Damage(name: "manifest a symlink", message: "keystore.json is not a regular file (a symlink or device?); devtrust refuses to follow it") { keystore, _ in
            plantSymlink(keystore + "/keystore.json", keystore: keystore)
        },
        Damage(name: "key file readable by others", message: "chmod 600") { keystore, keyFile in
            chmod(keystore + "/" + keyFile, 0o644)
        },
        Damage(name: "keystore directory open to the group", message: "chmod 700") { keystore, _ in
            chmod(keystore, 0o750)
        },
        Damage(name: "key file owned by another user", message: "is owned by uid 65534, not by you") { keystore, keyFile in
            chown(keystore + "/" + keyFile, 65534, 65534)
        },
        Damage(name: "keystore directory owned by another user", message: "is owned by uid 65534, not by you") { keystore, _ in
            chown(keystore, 65534, 65534)
        },
    ]

    static func snapshot(_ directory: String) -> [String: [UInt8]] {
        var files = [String: [UInt8]]()
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            var status = stat()
            lstat(directory + "/" + name, &status)
            let contents = FileManager.default.contents(atPath: directory + "/" + name).map { Array($0) } ?? []
            files[name] = contents + Array("|mode \(status.st_mode) uid \(status.st_uid)".utf8)
        }
        return files
    }

    /// A keystore with a software key, damaged; the victim file a planted symlink points at.
    static func damagedKeystore(_ damage: Damage, in directory: TemporaryDirectory) throws -> (cli: InProcessCLI, victim: String) {
        let victim = Self.victim(directory.file("ks"))
        _ = FileManager.default.createFile(atPath: victim, contents: Data(Self.marker.utf8), attributes: [.posixPermissions: 0o600])
        chown(victim, 65534, 65534)
        var cli = InProcessCLI(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let keyFile = try #require(directory.entries("ks").first { $0.hasPrefix("key-") })
        try damage.apply(directory.file("ks"), keyFile)
        return (cli, victim)
    }

    @Test(.enabled(if: getuid() == 0 && ExternalTool.openssl.shouldRun), arguments: damages)
    func aDamagedKeystoreIsAClearErrorAndStaysAsItIs(damage: Damage) throws {
        let directory = TemporaryDirectory()
        let (cli, victim) = try Self.damagedKeystore(damage, in: directory)
        let before = Self.snapshot(directory.file("ks"))
        for arguments in Self.keystoreReaders {
            let result = try cli.run(arguments)
            #expect(result.status == 7, "\(damage.name), \(arguments[0]): \(result)")
            let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("devtrust: error: ") }
            #expect(errors.count == 1 && result.stderr.contains(damage.message), "\(damage.name), \(arguments[0]): \(result.stderr)")
            #expect(!result.stdout.contains(Self.marker) && !result.stderr.contains(Self.marker), "the symlink was followed")
        }
        #expect(Self.snapshot(directory.file("ks")) == before, "\(damage.name): the keystore changed")
        #expect(FileManager.default.contents(atPath: victim) == Data(Self.marker.utf8), "the symlink target changed")
    }

    @Test(.enabled(if: getuid() == 0 && ExternalTool.openssl.shouldRun), arguments: damages)
    func aDamagedKeystoreEndsTheProcessWithExitSeven(damage: Damage) throws {
        let directory = TemporaryDirectory()
        _ = try Self.damagedKeystore(damage, in: directory)
        var binary = DevtrustBinary(keystore: directory.file("ks"))
        binary.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        let before = Self.snapshot(directory.file("ks"))
        // Every command that reads the keystore: an error and exit 7, never a crash.
        for arguments in Self.keystoreReaders {
            let result = try binary.run(arguments)
            #expect(result.status == 7 && !result.signaled, "\(damage.name), \(arguments[0]): \(result)")
            #expect(result.stderr.contains(damage.message) && !result.stderr.contains(Self.marker), "\(damage.name), \(arguments[0]): \(result.stderr)")
        }
        #expect(Self.snapshot(directory.file("ks")) == before, "\(damage.name): the keystore changed")
    }

    static let keystoreReaders = [["token", "--device-id", "x"], ["pubkey"], ["sign-challenge", "AQID"], ["device-data"],
                                  ["register", "--server", "http://127.0.0.1:9", "--non-interactive"], ["init"]]

    @Test(.enabled(if: getuid() == 0)) func aKeystoreDirectoryPlantedByAnotherUserIsRefused() throws {
        // Someone else created the directory first (in a shared /tmp, say): never use it.
        let directory = TemporaryDirectory()
        let planted = directory.file("planted")
        mkdir(planted, 0o700)
        chown(planted, 65534, 65534)
        let result = try InProcessCLI(keystore: planted).run("init")
        #expect(result.status == 7 && result.stderr.contains("is owned by uid 65534, not by you"), "\(result)")
        #expect(directory.entries("planted").isEmpty)
    }

    @Test func aKeystorePathThatIsAFileIsRefused() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("not-a-directory", "x")
        let result = try InProcessCLI(keystore: path).run("init")
        #expect(result.status == 7, "\(result)")
        #expect(directory.read("not-a-directory") == Array("x".utf8))
    }

    struct ConfigCase: Sendable, CustomTestStringConvertible {
        let name: String
        let contents: [UInt8]
        let mode: Int
        let owner: uid_t?
        let message: String
        var testDescription: String { name }
    }

    static let configCases: [ConfigCase] = [
        ConfigCase(name: "truncated JSON", contents: Array(#"{"claims":"#.utf8), mode: 0o600, owner: nil, message: "is not valid JSON: unexpected end of input"),
        ConfigCase(name: "invalid UTF-8", contents: Array(#"{"claims":{"a":""#.utf8) + [0xFF, 0xFE] + Array(#""}}"#.utf8), mode: 0o600, owner: nil,
                   message: "is not valid JSON: invalid UTF-8 at byte 16"),
        ConfigCase(name: "unknown field", contents: Array(#"{"clams":{}}"#.utf8), mode: 0o600, owner: nil, message: "unknown field \"clams\""),
        ConfigCase(name: "wrong type", contents: Array(#"{"collector":{"command":"x"}}"#.utf8), mode: 0o600, owner: nil, message: "field \"collector\" must be an array"),
        ConfigCase(name: "writable by anyone", contents: Array(#"{"collector":["/bin/true"]}"#.utf8), mode: 0o666, owner: nil, message: "is writable by anyone (mode 666)"),
        ConfigCase(name: "writable by its group", contents: Array("{}".utf8), mode: 0o620, owner: nil, message: "is writable by its group (mode 620)"),
        ConfigCase(name: "owned by another user", contents: Array("{}".utf8), mode: 0o644, owner: 65534, message: "is owned by uid 65534, neither you (uid 0) nor root"),
    ]

    @Test(arguments: configCases)
    func aBadConfigurationFileIsExitTwo(config: ConfigCase) throws {
        if config.owner != nil && getuid() != 0 { return }
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let path = directory.write("config.json", config.contents, mode: config.mode)
        if let owner = config.owner { chown(path, owner, owner) }
        cli.extraEnvironment["DEVTRUST_CONFIG"] = path
        for arguments in [["token", "--device-id", "x"], ["attributes"], ["device-data"]] {
            let result = try cli.run(arguments)
            #expect(result.status == 2, "\(config.name), \(arguments[0]): \(result)")
            #expect(result.stderr.contains(config.message) && result.stdout.isEmpty, "\(config.name): \(result.stderr)")
        }
    }

    @Test(.enabled(if: getuid() == 0)) func aCollectorOthersCanChangeIsNotRun() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        let ran = directory.file("ran")
        let program = directory.write("collector.sh", "#!/bin/sh\ntouch \(ran)\necho '{\"site\":\"berlin\"}'\n", mode: 0o777)
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"collector":["\#(program)"],"postureCacheSeconds":0}"#)
        try cli.run("init", "--backend", "software", "-q")
        let unsafe = try cli.run("attributes", "--explain")
        #expect(unsafe.status == 0)
        #expect(unsafe.stderr.contains("is writable by anyone (mode 777), so devtrust does not run it"), "\(unsafe)")
        #expect(!FileManager.default.fileExists(atPath: ran) && !unsafe.stdout.contains("berlin"))
        chmod(program, 0o755)
        let safe = try cli.run("attributes")
        #expect(safe.status == 0 && safe.stdout.contains("berlin"), "\(safe)")
    }

    @Test(.enabled(if: getuid() == 0)) func aCollectorInADirectoryOthersCanWriteToIsNotRun() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        let ran = directory.file("ran")
        let shared = directory.file("shared")
        mkdir(shared, 0o700)
        let program = shared + "/collector.sh"
        _ = FileManager.default.createFile(atPath: program, contents: Data("#!/bin/sh\ntouch \(ran)\necho '{\"site\":\"berlin\"}'\n".utf8))
        chmod(program, 0o755)
        chmod(shared, 0o777)
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"collector":["\#(program)"],"postureCacheSeconds":0}"#)
        try cli.run("init", "--backend", "software", "-q")
        let unsafe = try cli.run("attributes", "--explain")
        #expect(unsafe.status == 0)
        #expect(unsafe.stderr.contains("is in \(shared), which others can write to (mode 777), so devtrust does not run it"), "\(unsafe)")
        #expect(!FileManager.default.fileExists(atPath: ran) && !unsafe.stdout.contains("berlin"))
        // The sticky bit (as on /tmp) stops others replacing a file they do not own.
        chmod(shared, 0o1777)
        let sticky = try cli.run("attributes")
        #expect(sticky.status == 0 && sticky.stdout.contains("berlin"), "\(sticky)")
        // A collector that is not there is reported by running it, not as a trust problem.
        unlink(program)
        let missing = try cli.run("attributes", "--explain")
        #expect(missing.status == 0 && missing.stderr.contains("cannot run \(program): No such file or directory"), "\(missing)")
    }
}
