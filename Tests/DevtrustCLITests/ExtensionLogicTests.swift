import DevtrustTestSupport
import Foundation
import Testing

/// The browser extension's own logic (browser/background.js) in node, against fakes of the
/// browser's API and of its timers that the script drives (Tests/Interop/extension_host_timeout.js):
/// what a real browser would take the extension's real timers to show, in a fraction of a second.
/// BrowserExtensionTests runs the same code in Chromium and Firefox.
@Suite struct ExtensionLogicTests {
    static let node = "/usr/bin/node"

    /// When one request to the native host runs out its time, the extension disconnects the port;
    /// every other request waiting on that port fails then too (a config check that hangs no
    /// longer holds a sign-in's token request for its own full timeout), and the next request
    /// connects again.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: node) || ExternalTool.isCI))
    func aHostTimeoutFailsEveryRequestWaitingOnThatPort() throws {
        let result = try ProcessRunner.run(Self.node, [Repository.path("Tests/Interop/extension_host_timeout.js"), Repository.path("browser/background.js")],
                                           environment: ["PATH": "/usr/bin:/bin"])
        #expect(result.status == 0 && result.stdout == "ok\n", "\(result)")
    }
}
