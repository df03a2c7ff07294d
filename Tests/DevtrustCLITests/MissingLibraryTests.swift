import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// libcurl and libqrencode are loaded only when a command uses them, so
/// without them every other command works, and the one that needs libcurl
/// says what to install. Each is hidden as in TSSMissingTests: replaced by an
/// empty file in a private mount namespace (needs root and unshare).
enum HiddenLibrary {
    static let directory = "/usr/lib/x86_64-linux-gnu"

    static func isPossible(_ name: String) -> Bool {
        HiddenTSS.isPossible && FileManager.default.fileExists(atPath: directory + "/" + name)
    }

    /// devtrust run through a script that hides `name` first.
    static func devtrust(hiding name: String, in scratch: TemporaryDirectory) -> DevtrustBinary {
        let hide = "mount --bind /dev/null \(directory)/\(name) && exec \"$0\" \"$@\""
        let script = scratch.write("devtrust-without-\(name)", """
            #!/bin/sh
            exec /usr/bin/unshare -m /bin/sh -c '\(hide)' '\(DevtrustBinary.defaultPath)' "$@"

            """, mode: 0o700)
        return DevtrustBinary(keystore: scratch.file("ks"), path: script)
    }
}

@Suite struct MissingLibraryTests {
    @Test(.enabled(if: HiddenLibrary.isPossible("libcurl.so.4")))
    func withoutLibcurlARequestSaysWhatToInstallAndTokensStillWork() throws {
        let scratch = TemporaryDirectory()
        var cli = HiddenLibrary.devtrust(hiding: "libcurl.so.4", in: scratch)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        let initialized = try cli.run("init", "--backend", "software", "-q")
        #expect(initialized.status == 0, "\(initialized)")
        let token = try cli.run("token", "--device-id", "x")
        #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3, "\(token)")
        let login = try cli.run("login", "--device-code", "--server", "https://127.0.0.1:9", "--client-id", "c")
        #expect(login.status == 5, "\(login)")
        #expect(login.stderr.contains("devtrust: error: cannot load libcurl (") && login.stderr.contains("libcurl.so.4"), "\(login.stderr)")
        #expect(login.stderr.contains("); install it: apt-get install libcurl4"), "\(login.stderr)")
    }

    @Test(.enabled(if: HiddenLibrary.isPossible("libqrencode.so.4") && ReferenceServer.shouldRun))
    func withoutLibqrencodeTheDeviceCodeIsShownWithoutAQRCode() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1"])
        let scratch = TemporaryDirectory()
        let cli = HiddenLibrary.devtrust(hiding: "libqrencode.so.4", in: scratch)
        var environment = cli.environment
        environment["TERM"] = "xterm"
        let script = #"[{"expect":"signed in at","send":""}]"#
        // A window the QR code would fit.
        let run = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/pty_session.py"), "--size", "120x40", script, "--", cli.path,
                                                                       "login", "--device-code", "--verbose", "--server", server.url, "--client-id", "devtrust-app"],
                                        environment: environment)
        let report = try JSONParser.parse(run.stdout).objectValue!
        let transcript = report["transcript"]?.stringValue ?? ""
        #expect(report["exit"] == .integer(0), "\(transcript)")
        let lines = transcript.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n")
        #expect(transcript.contains("no QR code: libqrencode is not available") && DeviceCodeScreenReading.qrRows(lines).isEmpty, "\(transcript)")
        #expect(DeviceCodeScreenReading.bigLetterRows(lines).count == 5, "\(transcript)")
        #expect(report["timedOut"] == .bool(false) && transcript.contains("signed in at"), "\(transcript)")
    }
}
