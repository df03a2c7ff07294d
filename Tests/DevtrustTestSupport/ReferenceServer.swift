import DevtrustEncoding
import Foundation

/// The project's reference flow server (Tests/ReferenceServer), started for
/// one test on a free loopback port and killed when released.
public final class ReferenceServer: @unchecked Sendable {
    public let url: String
    public let database: TemporaryDirectory
    private let process: ListeningProcess

    public static var shouldRun: Bool { ExternalTool.python.shouldRun }

    /// - Parameters:
    ///   - arguments: reference_server.py options (`--device-policy`, `--fault MODE`, ...).
    ///   - otp: the one code every OTP step sends, or nil for a new random one each time (read them in `outbox()`).
    public init(_ arguments: [String] = [], otp: String? = "123456") throws {
        database = TemporaryDirectory("reference-server")
        process = try ListeningProcess(ExternalTool.python.rawValue,
                                       [Repository.path("Tests/ReferenceServer/reference_server.py"), "--port", "0",
                                        "--db", database.file("server.sqlite")] + (otp.map { ["--otp", $0] } ?? []) + arguments,
                                       what: "the reference server")
        url = process.announced
    }

    deinit { stop() }

    public func stop() {
        process.stop()
    }

    /// GET a JSON document from the server (devices, outbox, device-check).
    public func get(_ path: String, headers: [String: String] = [:], caFile: String? = nil) throws -> JSONValue {
        var arguments = ["-s", "--max-time", "10", url + path]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let caFile { arguments += ["--cacert", caFile] }
        let result = try ProcessRunner.run("/usr/bin/curl", arguments)
        return try JSONParser.parse(result.stdout)
    }

    /// Each GET /oauth2/authorize as it arrived (Tests/ReferenceServer/browser_pages.py): query,
    /// deviceToken, deviceTokenCount, state, receivedAt (ms), deviceCheck.
    public func authorizeRecords() throws -> [JSONObject] {
        try get("/api/authorize-records").arrayValue?.compactMap(\.objectValue) ?? []
    }

    /// Adds `what` to the start page's reports, as the page does (GET /test/report): a page
    /// that waits for it (until=WHAT, Tests/ReferenceServer/browser_pages.py) goes on.
    public func report(_ what: String) throws {
        let result = try ProcessRunner.run("/usr/bin/curl", ["-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
                                                              "-G", "--data-urlencode", "what=" + what, url + "/test/report"])
        guard result.stdout == "204" else { throw FixtureError("GET /test/report?what=\(what): \(result)") }
    }

    /// What the start page (/test/start) reported, in order.
    public func browserReports() throws -> [String] {
        try get("/api/browser-reports").arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// The codes the OTP steps sent (registration and sign-in), oldest first.
    public func outbox() throws -> [String] {
        try get("/api/outbox").arrayValue?.compactMap { $0.objectValue?["code"]?.stringValue } ?? []
    }

    /// Each continue request of a flow: `step`, `actionId`, `inputs` (the names sent).
    public func flowRequests() throws -> [JSONObject] {
        try get("/api/flow-requests").arrayValue?.compactMap(\.objectValue) ?? []
    }

    public func devices(caFile: String? = nil) throws -> [JSONObject] {
        try get("/api/devices", caFile: caFile).arrayValue?.compactMap(\.objectValue) ?? []
    }
}

/// A private CA and a server certificate for 127.0.0.1 / localhost, made with the openssl CLI.
public struct TestCertificateAuthority {
    public let directory = TemporaryDirectory("test-ca")
    public var caCertificate: String { directory.file("ca.pem") }
    public var serverCertificate: String { directory.file("server.pem") }
    public var serverKey: String { directory.file("server.key") }

    /// - Parameters:
    ///   - names: the server certificate's subjectAltName entries.
    ///   - validDays: the server certificate's lifetime; -1 makes one that expired yesterday.
    public init(names: String = "IP:127.0.0.1,DNS:localhost", validDays: Int = 2) throws {
        let openssl = ExternalTool.openssl
        let d = directory
        for arguments in [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", d.file("ca.key"),
             "-out", d.file("ca.pem"), "-days", "2", "-subj", "/CN=devtrust test CA"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", d.file("server.key"),
             "-out", d.file("server.csr"), "-subj", "/CN=devtrust test server"],
        ] {
            let result = try openssl.run(arguments)
            guard result.status == 0 else { throw SwtpmError("openssl \(arguments[0]) failed: \(result.stderr)") }
        }
        d.write("extensions.cnf", "subjectAltName=\(names)\n")
        let signed = try openssl.run(["x509", "-req", "-in", d.file("server.csr"), "-CA", d.file("ca.pem"), "-CAkey", d.file("ca.key"),
                                      "-CAcreateserial", "-out", d.file("server.pem"), "-days", "\(validDays)", "-extfile", d.file("extensions.cnf")])
        guard signed.status == 0 else { throw SwtpmError("openssl x509 failed: \(signed.stderr)") }
    }
}
