import DevtrustEncoding
import Foundation

/// A headless Chromium or Firefox ESR in a private profile, with devtrust's
/// extension (the repository's browser/, or a copy with other timers) loaded or
/// not, started on one URL.
/// It leads a process group of its own: stopping it (or releasing it) kills the
/// whole process group, and any process left that names its directory.
public final class HeadlessBrowser: @unchecked Sendable {
    public enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case chromium, firefox

        public var tool: ExternalTool { self == .chromium ? .chromium : .firefox }
        public var description: String { rawValue }
    }

    /// Which extension the browser loads.
    public enum Extension: Sendable {
        /// None.
        case none
        /// The repository's browser/ as it is.
        case shipped
        /// A copy of browser/ with these timers (ExtensionTimers.extensionCopy), in the browser's directory.
        case timers(ExtensionTimers)
    }

    public let kind: Kind
    /// Where the profile (and, for Chromium, its NativeMessagingHosts) lives.
    public let directory: TemporaryDirectory
    private let process: BackgroundProcess
    /// Chromium's user data directory (its DevToolsActivePort file is there).
    private let chromiumUserData: String

    /// Chromium's user data directory below `home` (what `devtrust browser install
    /// --chromium-dir` is given), and where Firefox looks for host manifests: $HOME.
    public static func chromiumDirectory(home: String) -> String { home + "/.config/chromium" }

    /// - Parameters:
    ///   - home: $HOME for the browser (Firefox reads ~/.mozilla/native-messaging-hosts there;
    ///     Chromium's user data directory is `chromiumDirectory(home:)`).
    ///   - environment: the browser's environment, which the native host inherits (the keystore).
    ///   - withExtension: devtrust's extension as shipped, a copy with other timers, or none.
    ///   - url: the page to open once started.
    ///   - devTools: Chromium only: its DevTools HTTP endpoint on a free loopback port, so that
    ///     `openAsTheBrowser` can open a tab on a URL as the browser itself does (a typed URL).
    public init(_ kind: Kind, home: String, environment: [String: String], withExtension: Extension = .shipped, devTools: Bool = false,
                url: String) throws {
        self.kind = kind
        chromiumUserData = Self.chromiumDirectory(home: home)
        directory = TemporaryDirectory("browser-\(kind.rawValue)")
        var environment = environment
        environment["HOME"] = home
        environment.removeValue(forKey: "DISPLAY")
        environment.removeValue(forKey: "WAYLAND_DISPLAY")
        let extensionDirectory: String?
        switch withExtension {
        case .none: extensionDirectory = nil
        case .shipped: extensionDirectory = Repository.path("browser")
        case .timers(let timers): extensionDirectory = try timers.extensionCopy(in: directory.path)
        }
        let arguments: [String]
        switch kind {
        case .chromium:
            // The first navigation of a Chromium that is loading an unpacked extension can stay
            // pending forever (seen with 156 headless); a local page that moves on after a second does not.
            let boot = directory.write("boot.html", """
                <!DOCTYPE html><html><head><meta http-equiv="refresh" content="1;url=\(Self.htmlEscaped(url))"></head><body></body></html>
                """)
            arguments = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                         "--user-data-dir=" + Self.chromiumDirectory(home: home), "--disable-popup-blocking",
                         // The extension's console (and the pages') on stderr.
                         "--enable-logging=stderr", "--v=0",
                         // Nothing but loopback: no background traffic, and any other address through a proxy that is not there.
                         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-pings",
                         "--proxy-server=http://127.0.0.1:9",
                         // The start page, in a tab behind the ones it opens, keeps its timers (a 100 ms
                         // poll is otherwise run once a second: minutes over a suite).
                         "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                         "--disable-backgrounding-occluded-windows"]
                + (devTools ? ["--remote-debugging-port=0"] : [])
                + (extensionDirectory.map { ["--load-extension=" + $0] } ?? [])
                + ["file://" + boot]
        case .firefox:
            let profile = directory.file("profile")
            directory.write("profile/user.js", Self.firefoxPreferences)
            if let extensionDirectory {
                try Self.packFirefoxExtension(from: extensionDirectory, into: profile + "/extensions/" + Self.firefoxExtensionID + ".xpi")
            }
            environment["MOZ_CRASHREPORTER_DISABLE"] = "1"
            arguments = ["--headless", "--no-remote", "--profile", profile, url]
        }
        // Foundation starts it as the leader of a process group of its own, which stop() ends.
        process = try BackgroundProcess(kind.tool.rawValue, arguments, environment: environment)
    }

    deinit { stop() }

    public static let firefoxExtensionID = "host@devtrust.dev"
    public static let chromiumExtensionID = "gmoaoppoddchekmljfbfbbcndbaiflmf"

    /// What the browser printed: the extension's console messages among it
    /// (Chromium's log on stderr, Firefox's console on stdout).
    public var output: String { process.stdout + process.stderr }

    /// Polls until `condition` holds on the browser's output, or the time is up.
    @discardableResult
    public func waitForOutput(seconds: Double = 60, _ condition: (String) -> Bool) -> Bool {
        process.waitFor(seconds: seconds) { stdout, stderr in condition(stdout + stderr) }
    }

    /// Chromium started with `devTools`: opens a new tab on `url` through the DevTools HTTP
    /// endpoint (PUT /json/new), a navigation the browser starts itself, as for a typed URL
    /// or one from the command line (no web page's rules apply to it). Returns the URL the
    /// new tab was given.
    public func openAsTheBrowser(_ url: String, seconds: Double = 30) throws -> String {
        let portFile = chromiumUserData + "/DevToolsActivePort"
        let deadline = Date().addingTimeInterval(seconds)
        var port: String?
        while port == nil {
            port = (try? String(contentsOfFile: portFile, encoding: .utf8))?.split(separator: "\n").first.map(String.init)
            if port == nil {
                guard Date() < deadline else { throw FixtureError("no \(portFile): was the browser started with devTools?") }
                usleep(200_000)
            }
        }
        // Chromium unescapes the whole query once: the URL escaped whole comes out as it was ("#" included).
        let escaped = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let result = try ProcessRunner.run("/usr/bin/curl", ["-s", "--max-time", "10", "-X", "PUT", "http://127.0.0.1:\(port!)/json/new?" + escaped])
        guard result.status == 0, let opened = try JSONParser.parse(result.stdout).objectValue?["url"]?.stringValue else {
            throw FixtureError("DevTools did not open \(url): \(result)")
        }
        return opened
    }

    /// Kills the browser's process group, then any process that still names its directories.
    public func stop() {
        let group = process.pid
        if group > 0 { kill(-group, SIGKILL) }
        _ = process.finish(seconds: 10)
        for pid in Self.processes(naming: [directory.path]) { kill(pid, SIGKILL) }
    }

    /// Processes whose command line contains one of `paths` (what a browser left behind).
    public static func processes(naming paths: [String]) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let commandLine = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            return paths.contains { commandLine.contains($0) }
        }
    }

    /// The extension as Firefox installs it from a profile: a zip of browser/'s files (or a copy's).
    public static func packFirefoxExtension(from source: String = Repository.path("browser"), into path: String) throws {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: source)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let packed = try ProcessRunner.run(ExternalTool.python.rawValue, ["-m", "zipfile", "-c", path] + files, currentDirectory: source)
        guard packed.status == 0 else { throw FixtureError("could not pack the extension: \(packed)") }
    }

    static func htmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;")
    }

    /// A quiet ESR: unsigned add-ons from the profile enabled without asking, the console on
    /// stdout, windows opened by script allowed, JSON shown as text (the JSON viewer's page
    /// is not the server's origin), timers of background tabs not slowed (the start page's,
    /// behind the tabs it opens), and nothing but loopback on the network.
    static let firefoxPreferences = [
        ("xpinstall.signatures.required", "false"), ("extensions.autoDisableScopes", "0"), ("extensions.enabledScopes", "15"),
        ("devtools.console.stdout.chrome", "true"), ("devtools.console.stdout.content", "true"),
        ("browser.dom.window.dump.enabled", "true"), ("devtools.jsonview.enabled", "false"), ("dom.disable_open_during_load", "false"), ("dom.popup_maximum", "-1"),
        ("dom.min_background_timeout_value", "4"), ("dom.min_background_timeout_value_without_budget_throttling", "4"),
        ("dom.timeout.enable_budget_timer_throttling", "false"),
        ("browser.shell.checkDefaultBrowser", "false"), ("browser.aboutwelcome.enabled", "false"),
        ("datareporting.policy.dataSubmissionEnabled", "false"), ("toolkit.telemetry.reportingpolicy.firstRun", "false"),
        ("app.update.enabled", "false"), ("app.normandy.enabled", "false"), ("extensions.update.enabled", "false"),
        ("extensions.getAddons.cache.enabled", "false"), ("browser.safebrowsing.malware.enabled", "false"),
        ("browser.safebrowsing.phishing.enabled", "false"), ("network.captive-portal-service.enabled", "false"),
        ("network.connectivity-service.enabled", "false"), ("network.trr.mode", "5"),
        ("network.proxy.type", "1"), ("network.proxy.http", "\"127.0.0.1\""), ("network.proxy.http_port", "9"),
        ("network.proxy.ssl", "\"127.0.0.1\""), ("network.proxy.ssl_port", "9"),
    ].map { "user_pref(\"\($0.0)\", \($0.1));\n" }.joined()
}
