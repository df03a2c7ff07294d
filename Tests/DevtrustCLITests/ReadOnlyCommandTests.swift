import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Commands that only read the key leave the keystore byte for byte as it
/// was: the posture cache lives in the cache directory, with the keystore's
/// trust checks. In-process: nothing here depends on the process.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct ReadOnlyCommandTests {
    /// Every entry below the keystore directory: path, mode, and its bytes.
    static func fingerprint(_ root: String) throws -> [String] {
        var entries = [String]()
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let name = enumerator?.nextObject() as? String {
            let path = root + "/" + name
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            let mode = String((attributes[.posixPermissions] as? Int) ?? -1, radix: 8)
            let digest = FileManager.default.contents(atPath: path).map { $0.base64EncodedString() } ?? "directory"
            entries.append("\(name) \(mode) \(digest)")
        }
        return entries.sorted()
    }

    @Test func tokenPubkeyAndAttributesLeaveTheKeystoreUnchanged() throws {
        let server = try ReferenceServer()
        let directory = TemporaryDirectory()
        let runs = directory.file("runs")
        let collector = directory.write("collector.sh", "#!/bin/sh\necho run >> \(runs)\necho '{\"edrAgent\":\"running\"}'\n", mode: 0o755)
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        #expect(try cli.run(["register", "--server", server.url, "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        // A collector registration did not run: its result is new to every cache.
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"collector":["\#(collector)"],"postureCacheSeconds":300}"#)
        let before = try Self.fingerprint(directory.file("ks"))
        for arguments in [["token"], ["token", "--server", server.url], ["device-data"], ["pubkey"], ["pubkey", "--format", "jwk"],
                          ["pubkey", "--format", "thumbprint"], ["attributes"], ["attributes", "--explain"], ["status"]] {
            let result = try cli.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
        }
        #expect(try Self.fingerprint(directory.file("ks")) == before)
        // The collector ran once: its result was cached, in the cache directory, private.
        #expect(String(decoding: directory.read("runs") ?? [], as: UTF8.self) == "run\n")
        let cache = cli.cacheDirectory + "/posture.json"
        #expect(try JSONParser.parse(Array(try #require(FileManager.default.contents(atPath: cache)))).objectValue?.count == 2)
        #expect((try FileManager.default.attributesOfItem(atPath: cli.cacheDirectory)[.posixPermissions] as? Int) == 0o700)
        #expect((try FileManager.default.attributesOfItem(atPath: cache)[.posixPermissions] as? Int) == 0o600)
    }

    /// A cache another user could have written is not read: the attributes are collected again.
    @Test(arguments: ["world-writable directory", "group-readable file", "symlinked file"])
    func anUntrustedCacheIsNotRead(_ planting: String) throws {
        let directory = TemporaryDirectory()
        let runs = directory.file("runs")
        let collector = directory.write("collector.sh", "#!/bin/sh\necho run >> \(runs)\necho '{\"edrAgent\":\"running\"}'\n", mode: 0o755)
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        let command = "collector:" + collector
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"collector":["\#(collector)"],"postureCacheSeconds":300}"#)
        try cli.run("init", "--backend", "software", "-q")
        let now = Int64(Date().timeIntervalSince1970)
        let forged = JSONWriter.bytes(.object([command: .object(["at": .integer(now), "attributes": .array([
            .object(["name": .string("edrAgent"), "value": .string("forged"), "source": .string("planted")])])])]))
        try FileManager.default.createDirectory(atPath: cli.cacheDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let file = cli.cacheDirectory + "/posture.json"
        switch planting {
        case "world-writable directory":
            FileManager.default.createFile(atPath: file, contents: Data(forged), attributes: [.posixPermissions: 0o600])
            chmod(cli.cacheDirectory, 0o777)
        case "group-readable file":
            FileManager.default.createFile(atPath: file, contents: Data(forged), attributes: [.posixPermissions: 0o640])
        default:
            let elsewhere = directory.write("planted.json", String(decoding: forged, as: UTF8.self))
            chmod(elsewhere, 0o600)
            symlink(elsewhere, file)
        }
        let token = try cli.run("token", "--device-id", "x")
        #expect(token.status == 0, "\(token)")
        let claims = try JSONParser.parse(Base64URL.decode(String(token.output.split(separator: ".")[1]))).objectValue
        #expect(claims?["edrAgent"] == .string("running"), "\(planting): \(String(describing: claims))")
        #expect(String(decoding: directory.read("runs") ?? [], as: UTF8.self) == "run\n")
    }

    /// A cache directory that is the keystore (a symlink, or XDG_CACHE_HOME beside XDG_DATA_HOME)
    /// or lies inside it is not used: token leaves the keystore as it was.
    @Test(arguments: ["symlink to the keystore", "the keystore itself", "inside the keystore"])
    func aCacheThatIsTheKeystoreIsNotUsed(_ placement: String) throws {
        let directory = TemporaryDirectory()
        let collector = directory.write("collector.sh", "#!/bin/sh\necho '{\"edrAgent\":\"running\"}'\n", mode: 0o755)
        let keystore = directory.file("data/devtrust")
        var cli = DevtrustBinary(keystore: keystore)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        switch placement {
        case "symlink to the keystore":
            try FileManager.default.createDirectory(atPath: directory.file("cache"), withIntermediateDirectories: true)
            symlink(keystore, directory.file("cache/devtrust"))
            cli.extraEnvironment["XDG_CACHE_HOME"] = directory.file("cache")
        case "the keystore itself":
            cli.extraEnvironment["XDG_CACHE_HOME"] = directory.file("data")
        default:
            cli.extraEnvironment["XDG_CACHE_HOME"] = keystore
        }
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"collector":["\#(collector)"],"postureCacheSeconds":300}"#)
        let before = try Self.fingerprint(keystore)
        let token = try cli.run("token", "--device-id", "x")
        #expect(token.status == 0, "\(token)")
        #expect(try Self.fingerprint(keystore) == before, "\(placement): the keystore changed")
    }
}
