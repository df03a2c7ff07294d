import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// The software key's bytes do not linger in a running devtrust: after it
/// read the key file and signed the registration challenge and device data,
/// neither the PEM text, the PKCS#8 DER nor the private scalar is anywhere in
/// the process's memory (heap, stack, mappings), read through /proc/PID/mem
/// while devtrust waits at the next prompt. The password given on the command
/// line is the positive control: argv cannot be wiped, and the scan finds it.
@Suite(.enabled(if: getuid() == 0 && ReferenceServer.shouldRun)) struct KeyMemoryTests {
    @Test func theKeyIsWipedOnceUsed() throws {
        let server = try ReferenceServer(["--terms-step"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("key-") })
        let needles = try KeyNeedles.of(try #require(directory.read("ks/" + file))) + ["password=" + Hex.encode(Array("correct horse".utf8))]
        let command = [cli.path, "--keystore", directory.file("ks"), "register", "--server", server.url,
                       "--input", "http://wso2.com/claims/emailaddress=alice@example.com", "--input", "password=correct horse", "--input", "otp=123456"]
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/memory_scan.py"), "2"] + command + ["--"] + needles)
        let prompts = try #require(try JSONParser.parse(result.stdout).objectValue?["prompts"]?.arrayValue, "\(result)")
        // The OTP step's buttons (after the key was read), then the terms (after it signed).
        #expect(prompts.count == 2, "\(result.stdout)")
        for prompt in prompts {
            let found = prompt.objectValue?["found"]?.objectValue ?? [:]
            #expect(found["password"] != nil, "the scan did not find the password in argv: it scans nothing (\(prompt))")
            KeyNeedles.expectNoneFound(found, at: prompt)
        }
    }
}

/// `init --import` of a software key: once the keystore holds the key, neither
/// the imported file's PEM text, its DER nor the private scalar is left in the
/// process (not in the file reader's buffer, the import's contents, a String
/// of the file, or a parser's copy). devtrust is held at its first report
/// ("imported a software P-256 device key ...") by a stderr pipe that is full,
/// as behind a slow reader, and its memory read there. The key file's name,
/// in argv, is the positive control.
@Suite(.enabled(if: getuid() == 0 && ExternalTool.python.shouldRun && ExternalTool.openssl.shouldRun)) struct ImportedKeyMemoryTests {
    @Test func anImportedKeyIsWipedOnceStored() throws {
        let directory = TemporaryDirectory()
        let marker = "import-marker-5c1e"
        let keyPath = directory.file(marker + ".pem")
        #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath]).status == 0)
        let needles = try KeyNeedles.of(try #require(directory.read(marker + ".pem"))) + ["path=" + Hex.encode(Array(marker.utf8))]
        let command = [DevtrustBinary.defaultPath, "--keystore", directory.file("ks"), "init", "--backend", "software", "--import", keyPath]
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/memory_scan.py"), "stderr"] + command + ["--"] + needles)
        let prompts = try #require(try JSONParser.parse(result.stdout).objectValue?["prompts"]?.arrayValue, "\(result)")
        #expect(prompts.count == 1, "devtrust did not stop at its report: \(result)")
        for prompt in prompts {
            let text = prompt.objectValue?["text"]?.stringValue ?? ""
            #expect(text.contains("imported a software P-256 device key"), "\(prompt)")
            let found = prompt.objectValue?["found"]?.objectValue ?? [:]
            #expect(found["path"] != nil, "the scan did not find the key file's name in argv: it scans nothing (\(prompt))")
            KeyNeedles.expectNoneFound(found, at: prompt)
        }
    }
}

/// What memory_scan.py looks for of a software key: its scalar (and the first
/// 12 bytes of it), its PKCS#8 DER and two lines of its PEM text.
enum KeyNeedles {
    static let names = ["scalar", "scalar-prefix", "der", "pem-line-1", "pem-line-2"]

    static func of(_ file: [UInt8]) throws -> [String] {
        let pem = String(decoding: file, as: UTF8.self)
        let der = try #require(PEM.decode(pem, label: "PRIVATE KEY"))
        let start = try #require((0..<der.count - 34).first { der[$0] == 0x04 && der[$0 + 1] == 0x20 }) + 2
        let lines = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        return [
            "scalar=" + Hex.encode(der[start..<start + 32]), "scalar-prefix=" + Hex.encode(der[start..<start + 12]),
            "der=" + Hex.encode(der), "pem-line-1=" + Hex.encode(Array(lines[0].utf8)), "pem-line-2=" + Hex.encode(Array(lines[1].utf8)),
        ]
    }

    static func expectNoneFound(_ found: JSONObject, at prompt: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) {
        for name in names {
            #expect(found[name] == nil, "\(name) is still in memory at \(prompt.objectValue?["text"] ?? .null): \(found[name] ?? .null)",
                    sourceLocation: sourceLocation)
        }
    }
}

/// devtrust makes itself undumpable: another process of the same user cannot
/// read its memory (or attach to it, or get a core file), while it can read
/// that of an ordinary process (the control). Run as nobody, from root.
@Suite(.enabled(if: getuid() == 0 && ReferenceServer.shouldRun)) struct UndumpableTests {
    @Test func anotherProcessOfTheSameUserCannotReadDevtrustsMemory() throws {
        let server = try ReferenceServer()
        let directory = TemporaryDirectory()
        chmod(directory.path, 0o755)
        let home = directory.file("home")
        mkdir(home, 0o700)
        chown(home, 65534, 65534)
        // A copy nobody can execute (the build directory may not be reachable for nobody).
        let binary = directory.file("devtrust")
        _ = FileManager.default.createFile(atPath: binary, contents: FileManager.default.contents(atPath: DevtrustBinary.defaultPath))
        chmod(binary, 0o755)
        // Only what is named here: nothing of the developer's environment (DEVTRUST_CONFIG, ...).
        let clean = ["PATH": "/usr/bin:/bin"]
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/env", "HOME=" + home, "DEVTRUST_TCTI=device:/nonexistent"]
        let initialized = try ProcessRunner.run("/usr/bin/setpriv", asNobody + [binary, "--keystore", home + "/ks", "init", "--backend", "software", "-q"], environment: clean)
        #expect(initialized.status == 0, "\(initialized)")
        let scanner = [ExternalTool.python.rawValue, Repository.path("Tests/Interop/memory_scan.py"), "1"]
        let needle = ["--", "password=" + Hex.encode(Array("correct horse".utf8))]

        let control = try ProcessRunner.run("/usr/bin/setpriv", asNobody + scanner + ["/bin/sh", "-c", "printf 'name:'; read x", "correct horse"] + needle, environment: clean)
        let controlFound = try JSONParser.parse(control.stdout).objectValue?["prompts"]?.arrayValue?.first?.objectValue?["found"]
        #expect(controlFound != nil && controlFound != .null, "the scanner cannot read an ordinary process either: \(control)")

        let register = [binary, "--keystore", home + "/ks", "register", "--server", server.url, "--input",
                        "http://wso2.com/claims/emailaddress=alice@example.com", "--input", "password=correct horse", "--input", "otp=123456"]
        let scanned = try ProcessRunner.run("/usr/bin/setpriv", asNobody + scanner + register + needle, environment: clean)
        let prompts = try JSONParser.parse(scanned.stdout).objectValue?["prompts"]?.arrayValue ?? []
        #expect(prompts.count == 1 && prompts.first?.objectValue?["found"] == .null, "devtrust's memory was readable: \(scanned)")
    }
}
