import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

@Suite struct AttributesCommandTests {
    /// Through the binary: `attributes` end to end.
    @Test func printsTheClaimsTokensCarryAndExplainsThem() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"claims":{"site":"berlin"}}"#)
        try cli.run("init", "-q")
        let attributes = try JSONParser.parse(try cli.run("attributes").stdout).objectValue!
        #expect(attributes["platform"] == .string("linux") && attributes["site"] == .string("berlin") && attributes["keyProtection"] == .string("software"))
        let token = try cli.run("token", "--device-id", "x").output
        let claims = try JSONParser.parse(Base64URL.decode(String(token.split(separator: ".")[1]))).objectValue!
        for member in attributes.members {
            #expect(claims[member.key] == member.value, "\(member.key) differs between attributes and the token")
        }
        let explained = try JSONParser.parse(try cli.run("attributes", "--explain").stdout).objectValue!
        #expect(explained["site"]?.objectValue?["source"] == .string("claims in \(directory.file("config.json"))"))
        #expect(explained["secureBoot"]?.objectValue?["source"]?.stringValue?.isEmpty == false)
        for member in explained.members {
            #expect(member.value.objectValue?["source"]?.stringValue != nil, "\(member.key) has no source")
        }
    }

    /// In-process: the collector is run by devtrust, whichever process that is.
    @Test func theAdminCollectorIsCachedAndItsFailuresAreNotFatal() throws {
        let directory = TemporaryDirectory()
        let counter = directory.file("runs")
        let collector = directory.write("collector.sh", "#!/bin/sh\necho run >> \(counter)\necho '{\"edrAgent\":\"running\",\"patchLevel\":\"2026-11\",\"jti\":\"x\",\"nested\":{\"a\":\"b\"}}'\n", mode: 0o755)
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"collector":["\#(collector)"],"postureCacheSeconds":300}"#)
        try cli.run("init", "--backend", "software", "-q")
        let first = try cli.run("token", "--device-id", "x")
        #expect(first.status == 0)
        #expect(first.stderr.contains("skipped jti, nested"), "\(first.stderr)")
        let claims = try JSONParser.parse(Base64URL.decode(String(first.output.split(separator: ".")[1]))).objectValue!
        #expect(claims["edrAgent"] == .string("running") && claims["patchLevel"] == .string("2026-11") && claims["nested"] == nil)
        #expect(claims["jti"] != .string("x"))
        for _ in 0..<3 { try cli.run("token", "--device-id", "x") }
        #expect(String(decoding: directory.read("runs") ?? [], as: UTF8.self) == "run\n", "the collector ran more than once within its cache time")

        for (script, problem) in [("#!/bin/sh\nexit 3\n", "exited with 3"), ("#!/bin/sh\necho not json\n", "did not print a JSON object"),
                                  ("#!/bin/sh\nsleep 5\n", "did not finish within 1000 ms")] {
            let failing = directory.write("failing.sh", script, mode: 0o755)
            var other = DevtrustBinary(keystore: directory.file("ks2"))
            other.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("failing.json", #"{"collector":["\#(failing)"],"collectorTimeoutSeconds":1,"postureCacheSeconds":0}"#)
            try other.run("init", "--backend", "software", "-q")
            let result = try other.run("token", "--device-id", "x")
            #expect(result.status == 0 && result.stderr.contains(problem), "\(result)")
            #expect(!result.output.isEmpty)
        }
    }
}
