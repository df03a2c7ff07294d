import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// The software key's bytes do not linger in a running devtrust. memory_scan.py
/// reads its memory (heap, stacks, every mapping, through /proc/PID/mem) where
/// it waits, and looks for any 8 bytes of the private scalar in either byte
/// order (a freed buffer keeps all but the 16 bytes the allocator writes over
/// its start; a BIGNUM holds the bytes reversed) and any 12 base64 characters
/// of it in the PEM text. Each test runs against this build and the release
/// build (DevtrustBinary.builds): what is left behind depends on the optimiser
/// and the linker (the release build kept a copy the debug build did not).

/// `register`, at each prompt: after it read the key file, and after it signed
/// the challenge and the device data. Nothing of the file is left (its text,
/// its DER, the scalar read from it); the one copy of the scalar is OpenSSL's
/// BIGNUM in the EC_KEY devtrust signs with, which it needs until it exits.
/// The password in argv is the positive control: argv cannot be wiped.
@Suite(.enabled(if: getuid() == 0 && ReferenceServer.shouldRun)) struct KeyMemoryTests {
    @Test(arguments: DevtrustBinary.builds)
    func theKeyIsWipedOnceUsed(binary: String) throws {
        try #require(DevtrustBinary.isCurrent(binary), "\(binary) is missing or older than the sources: make build")
        let server = try ReferenceServer(["--terms-step"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"), path: binary)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let needles = ["@" + directory.file("ks/key-*.pem"), "password=" + Hex.encode(Array("correct horse".utf8))]
        let command = [cli.path, "--keystore", directory.file("ks"), "register", "--server", server.url,
                       "--input", "http://wso2.com/claims/emailaddress=alice@example.com", "--input", "password=correct horse", "--input", "otp=123456"]
        // The script starts devtrust with its own environment: the test's keystore, cache and configuration
        // (with only PATH, as root, `register` wrote the machine's /var/cache/devtrust/posture.json and clock.json).
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/memory_scan.py"), "2"] + command + ["--"] + needles,
                                           environment: cli.environment)
        let prompts = try #require(try JSONParser.parse(result.stdout).objectValue?["prompts"]?.arrayValue, "\(result)")
        // The OTP step's buttons (after the key was read), then the terms (after it signed).
        #expect(prompts.count == 2, "\(result.stdout)")
        for prompt in prompts {
            let found = prompt.objectValue?["found"]?.objectValue ?? [:]
            #expect(found["password"] != nil, "the scan did not find the password in argv: it scans nothing (\(prompt))")
            KeyNeedles.expectNoneFound(found, at: prompt, except: "scalar-reversed")
            let reversed = found["scalar-reversed"]?.arrayValue?.map { $0.objectValue?["length"] } ?? []
            #expect(reversed == [.integer(32)], "the live EC_KEY's BIGNUM should be the one copy of the scalar: \(prompt)")
        }
    }
}

/// `init`, creating or importing a software key, and its refusals: once
/// devtrust reports (success or error), nothing of the key is left in the
/// process, not even OpenSSL's: the key was freed (cleared) with the keystore
/// update. devtrust is held at its report by a stderr pipe that is full, as
/// behind a slow reader. The keystore's name, in argv, is the positive control.
@Suite(.enabled(if: getuid() == 0 && ExternalTool.python.shouldRun && ExternalTool.openssl.shouldRun)) struct KeyCommandMemoryTests {
    enum Command: String, CaseIterable {
        /// init --backend software: the key devtrust writes (OpenSSL's encoder left the scalar's last 16 bytes in the heap).
        case create
        case importPKCS8
        /// A comment that mentions the TSS2 label (the old code made a String of the file).
        case importWithTheTSS2LabelInAComment
        /// Refused after the key was read and written out for the keystore.
        case importForTheTPMBackend
        /// Refused by the pair check, with the key read.
        case importOfAMismatchedPair
        /// Refused after the scalar was read from the DER.
        case importOfADamagedECPrivateKey
        /// Refused while the PEM body is decoded.
        case importOfBadBase64
        /// Refused by its label (SEC1): never decoded, never a String.
        case importOfSEC1

        var report: String {
            switch self {
            case .create: return "created a software P-256 device key"
            case .importPKCS8, .importWithTheTSS2LabelInAComment: return "imported a software P-256 device key"
            default: return "devtrust: error: "
            }
        }
    }

    @Test(arguments: DevtrustBinary.builds, Command.allCases)
    func nothingOfTheKeyIsLeftOnceInitReports(binary: String, command: Command) throws {
        try #require(DevtrustBinary.isCurrent(binary), "\(binary) is missing or older than the sources: make build")
        let directory = TemporaryDirectory()
        let marker = "keystore-marker-5c1e"
        let key = directory.file("key.pem")
        #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key]).status == 0)
        let pem = String(decoding: try #require(directory.read("key.pem")), as: UTF8.self)
        let file = try #require(PKCS8KeyFile(pem: Array(pem.utf8)))
        var needles = ["@" + key, "marker=" + Hex.encode(Array(marker.utf8))]
        var arguments = ["init", "--backend", "software", "--import", directory.file("import.pem")]
        switch command {
        case .create:
            arguments = ["init", "--backend", "software"]
            needles[0] = "@" + directory.file(marker + "/key-*.pem")
        case .importPKCS8:
            directory.write("import.pem", pem)
        case .importWithTheTSS2LabelInAComment:
            directory.write("import.pem", "# exported for devtrust; not a -----BEGIN TSS2 PRIVATE KEY----- file\n" + pem)
        case .importForTheTPMBackend:
            directory.write("import.pem", pem)
            arguments[2] = "tpm"
        case .importOfAMismatchedPair:
            var mismatched = file
            // Another point on the curve: the negation of this one (y -> p - y).
            mismatched.publicPoint = file.publicPoint.map { [0x04] + $0[1..<33] + Self.negated(Array($0[33...])) }
            directory.write("import.pem", mismatched.pem())
        case .importOfADamagedECPrivateKey:
            directory.write("import.pem", file.pem(.byteInECPrivateKey))
        case .importOfBadBase64:
            var lines = pem.split(separator: "\n").map(String.init)
            lines[3] = "!" + lines[3].dropFirst()
            directory.write("import.pem", lines.joined(separator: "\n") + "\n")
        case .importOfSEC1:
            #expect(try ExternalTool.openssl.run(["ec", "-in", key, "-out", directory.file("import.pem")]).status == 0)
            let lines = String(decoding: try #require(directory.read("import.pem")), as: UTF8.self).split(separator: "\n")
            // The SEC1 text holds the scalar from its 10th character on (30 77 02 01 01 04 20 come first).
            needles.append("sec1-text~12=" + Hex.encode(Array((lines[1].dropFirst(12) + "\n" + lines[2]).utf8)))
        }
        let scan = [binary, "--keystore", directory.file(marker)] + arguments
        // devtrust gets the script's environment: a keystore, cache and configuration of the test's own.
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/memory_scan.py"), "stderr"] + scan + ["--"] + needles,
                                           environment: DevtrustBinary(keystore: directory.file(marker), path: binary).environment)
        let prompts = try #require(try JSONParser.parse(result.stdout).objectValue?["prompts"]?.arrayValue, "\(result)")
        #expect(prompts.count == 1, "devtrust did not stop at its report: \(result)")
        for prompt in prompts {
            let text = prompt.objectValue?["text"]?.stringValue ?? ""
            #expect(text.contains(command.report), "\(prompt)")
            let found = prompt.objectValue?["found"]?.objectValue ?? [:]
            #expect(found["marker"] != nil, "the scan did not find the keystore's name in argv: it scans nothing (\(prompt))")
            KeyNeedles.expectNoneFound(found, at: prompt)
            #expect(found["sec1-text"] == nil, "the SEC1 file's text is still in memory: \(prompt)")
        }
    }

    /// p - y for a P-256 coordinate: the y of the point's negation.
    static func negated(_ y: [UInt8]) -> [UInt8] {
        let p = Hex.decode("FFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF")!
        var result = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in (0..<32).reversed() {
            let difference = Int(p[index]) - Int(y[index]) - borrow
            result[index] = UInt8((difference + 256) % 256)
            borrow = difference < 0 ? 1 : 0
        }
        return result
    }
}

/// Every symbol is bound when devtrust starts (BIND_NOW): the first call of a
/// lazily bound function runs the dynamic linker's resolver, which saves the
/// vector registers on the stack with whatever they held (in the release build,
/// base64 of the scalar that a copy had just passed through).
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/readelf"))) struct ImmediateBindingTests {
    @Test(arguments: DevtrustBinary.builds)
    func everySymbolIsBoundAtStart(binary: String) throws {
        try #require(DevtrustBinary.isCurrent(binary), "\(binary) is missing or older than the sources: make build")
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary])
        let flags = dynamic.stdout.split(separator: "\n").filter { $0.contains("(FLAGS") }
        #expect(flags.contains { $0.contains("BIND_NOW") || $0.contains(" NOW") }, "\(binary): \(flags)")
    }
}

/// What memory_scan.py finds of a software key (`@FILE`, see the script).
enum KeyNeedles {
    static let names = ["scalar", "scalar-reversed", "pem-text", "pem-base64"]

    static func expectNoneFound(_ found: JSONObject, at prompt: JSONValue, except exception: String? = nil,
                                sourceLocation: SourceLocation = #_sourceLocation) {
        for name in names where name != exception {
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
        // Copies nobody can run: the checkout may not be reachable for nobody.
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: directory.path)
        let memoryScan = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/memory_scan.py"), into: directory.path)
        // Only what is named here: nothing of the developer's environment (DEVTRUST_CONFIG, ...).
        let clean = ["PATH": "/usr/bin:/bin"]
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/env", "HOME=" + home, "DEVTRUST_TCTI=device:/nonexistent"]
        let initialized = try ProcessRunner.run("/usr/bin/setpriv", asNobody + [binary, "--keystore", home + "/ks", "init", "--backend", "software", "-q"], environment: clean)
        #expect(initialized.status == 0, "\(initialized)")
        let scanner = [ExternalTool.python.rawValue, memoryScan, "1"]
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
