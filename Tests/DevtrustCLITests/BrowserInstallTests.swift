import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `devtrust browser install|uninstall`, through the binary, into a temporary
/// HOME and XDG_CONFIG_HOME (and, for --system, a scratch root).
@Suite struct BrowserInstallTests {
    /// A user whose home and configuration directory are temporary and empty.
    struct User {
        let directory = TemporaryDirectory()
        var cli: DevtrustBinary

        init() {
            cli = DevtrustBinary(keystore: directory.file("ks"))
            mkdir(directory.file("home"), 0o700)
            mkdir(directory.file("xdg"), 0o700)
            cli.extraEnvironment["HOME"] = directory.file("home")
            cli.extraEnvironment["XDG_CONFIG_HOME"] = directory.file("xdg")
        }

        var chromiumManifest: String { directory.file("xdg/chromium/NativeMessagingHosts/dev.devtrust.host.json") }
        var firefoxManifest: String { directory.file("home/.mozilla/native-messaging-hosts/dev.devtrust.host.json") }

        /// Every file and directory below home and xdg, for a before-and-after comparison.
        func tree() -> [String] {
            ["home", "xdg"].flatMap { top in
                (FileManager.default.enumerator(atPath: directory.file(top))?.allObjects as? [String] ?? []).map { top + "/" + $0 }
            }.sorted()
        }
    }

    static func manifest(_ path: String) throws -> JSONObject {
        let bytes = try #require(FileManager.default.contents(atPath: path), "no \(path)")
        return try #require(try JSONParser.parse(Array(bytes)).objectValue)
    }

    static func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int) ?? -1
    }

    /// The binary's own path, as /proc/self/exe gives it to the running binary.
    static var binaryPath: String { URL(fileURLWithPath: DevtrustBinary.defaultPath).resolvingSymlinksInPath().path }

    @Test func installWritesBothManifestsForTheUserAndIsIdempotent() throws {
        let user = User()
        let installed = try user.cli.run("browser", "install", "--json")
        #expect(installed.status == 0, "\(installed)")
        let chromium = try Self.manifest(user.chromiumManifest)
        let firefox = try Self.manifest(user.firefoxManifest)
        for manifest in [chromium, firefox] {
            #expect(manifest["name"] == .string("dev.devtrust.host") && manifest["type"] == .string("stdio"), "\(manifest)")
            let path = try #require(manifest["path"]?.stringValue)
            #expect(path.hasPrefix("/") && access(path, X_OK) == 0 && path == Self.binaryPath, "\(path)")
            #expect(manifest["description"]?.stringValue?.isEmpty == false)
        }
        #expect(chromium["allowed_origins"] == .array([.string("chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf/")]) && chromium["allowed_extensions"] == nil)
        #expect(firefox["allowed_extensions"] == .array([.string("host@devtrust.dev")]) && firefox["allowed_origins"] == nil)
        #expect(Self.mode(user.chromiumManifest) == 0o644 && Self.mode(user.firefoxManifest) == 0o644)
        let report = try #require(try JSONParser.parse(installed.stdout).objectValue)
        #expect(report["host"] == .string(Self.binaryPath), "\(report)")
        let results = report["manifests"]?.arrayValue?.compactMap { $0.objectValue } ?? []
        #expect(results.map { $0["path"]?.stringValue } == [user.chromiumManifest, user.firefoxManifest], "\(report)")
        #expect(results.allSatisfy { $0["result"] == .string("written") && $0["scope"] == .string("user") }, "\(report)")
        #expect(report["extension"]?.objectValue?["chromiumId"] == .string("gmoaoppoddchekmljfbfbbcndbaiflmf"))
        // People read where the files went and how to load the extension, on stderr.
        #expect(installed.stderr.contains("written: \(user.chromiumManifest)") && installed.stderr.contains("Load unpacked")
                && installed.stderr.contains("about:debugging"), "\(installed.stderr)")

        let before = [FileManager.default.contents(atPath: user.chromiumManifest), FileManager.default.contents(atPath: user.firefoxManifest)]
        let again = try user.cli.run("browser", "install", "--json")
        #expect(again.status == 0 && again.stdout.contains(#""result":"unchanged""#) && !again.stdout.contains(#""written""#), "\(again)")
        #expect([FileManager.default.contents(atPath: user.chromiumManifest), FileManager.default.contents(atPath: user.firefoxManifest)] == before)
    }

    /// The manifest names a host that works: started as Chromium starts it, it answers.
    @Test func theInstalledHostAnswersAsTheBrowserStartsIt() throws {
        let user = User()
        #expect(try user.cli.run("browser", "install", "--chromium", "-q").status == 0)
        let host = try #require(try Self.manifest(user.chromiumManifest)["path"]?.stringValue)
        let origin = try #require(try Self.manifest(user.chromiumManifest)["allowed_origins"]?.arrayValue?.first?.stringValue)
        let run = try NativeHostRun(host, [origin], environment: user.cli.environment, input: NativeMessaging.frame(#"{"type":"config"}"#))
        #expect(run.status == 0 && run.replies.first??["type"] == .string("config"), "\(run)")
    }

    @Test func eachBrowserAndEachDirectoryOnItsOwn() throws {
        let user = User()
        #expect(try user.cli.run("browser", "install", "--firefox", "-q").status == 0)
        #expect(FileManager.default.fileExists(atPath: user.firefoxManifest) && !FileManager.default.fileExists(atPath: user.chromiumManifest))
        #expect(try user.cli.run("browser", "uninstall", "--firefox", "-q").status == 0)
        #expect(try user.cli.run("browser", "install", "--chromium", "-q").status == 0)
        #expect(!FileManager.default.fileExists(atPath: user.firefoxManifest) && FileManager.default.fileExists(atPath: user.chromiumManifest))
        // A Chromium started with --user-data-dir=D reads D/NativeMessagingHosts.
        let dataDirectory = user.directory.file("profile")
        #expect(try user.cli.run("browser", "install", "--chromium", "--chromium-dir", dataDirectory, "-q").status == 0)
        #expect(try Self.manifest(dataDirectory + "/NativeMessagingHosts/dev.devtrust.host.json")["name"] == .string("dev.devtrust.host"))
        // Without XDG_CONFIG_HOME, Chromium's directory is in ~/.config.
        var plain = user.cli
        plain.extraEnvironment["XDG_CONFIG_HOME"] = ""
        #expect(try plain.run("browser", "install", "--chromium", "-q").status == 0)
        #expect(FileManager.default.fileExists(atPath: user.directory.file("home/.config/chromium/NativeMessagingHosts/dev.devtrust.host.json")))
    }

    /// An organisation's own build of the extension is allowed next to devtrust's.
    @Test func theConfigurationsExtensionIDsAreAllowedToo() throws {
        var user = User()
        user.cli.extraEnvironment["DEVTRUST_CONFIG"] = user.directory.write("config.json", #"{"browser":{"extensionIds":["abcdefghijklmnopabcdefghijklmnop","sso@acme.example"]}}"#)
        #expect(try user.cli.run("browser", "install", "-q").status == 0)
        #expect(try Self.manifest(user.chromiumManifest)["allowed_origins"]
                == .array([.string("chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf/"), .string("chrome-extension://abcdefghijklmnopabcdefghijklmnop/")]))
        #expect(try Self.manifest(user.firefoxManifest)["allowed_extensions"] == .array([.string("host@devtrust.dev"), .string("sso@acme.example")]))
    }

    /// Uninstall removes what install wrote, the directories it made when they are empty, and nothing else.
    @Test func uninstallRemovesExactlyWhatInstallWrote() throws {
        let user = User()
        let before = user.tree()
        #expect(try user.cli.run("browser", "install", "-q").status == 0)
        let removed = try user.cli.run("browser", "uninstall", "--json")
        #expect(removed.status == 0 && removed.stdout.components(separatedBy: #""result":"removed""#).count == 3, "\(removed)")
        #expect(user.tree() == before, "\(user.tree())")
        let again = try user.cli.run("browser", "uninstall", "--json")
        #expect(again.status == 0 && again.stdout.components(separatedBy: #""result":"absent""#).count == 3, "\(again)")

        // Another host's manifest beside ours stays, and so does the directory holding it.
        #expect(try user.cli.run("browser", "install", "-q").status == 0)
        let other = user.directory.file("home/.mozilla/native-messaging-hosts/org.example.other.json")
        _ = FileManager.default.createFile(atPath: other, contents: Data(#"{"name":"org.example.other"}"#.utf8))
        #expect(try user.cli.run("browser", "uninstall", "-q").status == 0)
        #expect(FileManager.default.fileExists(atPath: other) && !FileManager.default.fileExists(atPath: user.firefoxManifest))
        #expect(!FileManager.default.fileExists(atPath: user.chromiumManifest))
    }

    /// A manifest of this host's name is devtrust's, edited or not; any other file at its path is not:
    /// install does not overwrite it and uninstall does not delete it (and neither touches the other browser's).
    @Test func aFileThatIsNotDevtrustsIsLeftAlone() throws {
        let user = User()
        #expect(try user.cli.run("browser", "install", "-q").status == 0)
        var edited = try Self.manifest(user.firefoxManifest)
        edited["allowed_extensions"] = .array([.string("host@devtrust.dev"), .string("extra@example.org")])
        _ = FileManager.default.createFile(atPath: user.firefoxManifest, contents: Data(JSONWriter.bytes(.object(edited))))
        let reinstalled = try user.cli.run("browser", "install", "--firefox", "--json")
        #expect(reinstalled.status == 0 && reinstalled.stdout.contains(#""result":"replaced""#), "\(reinstalled)")
        #expect(try Self.manifest(user.firefoxManifest)["allowed_extensions"] == .array([.string("host@devtrust.dev")]))
        _ = FileManager.default.createFile(atPath: user.firefoxManifest, contents: Data(JSONWriter.bytes(.object(edited))))
        #expect(try user.cli.run("browser", "uninstall", "--firefox", "-q").status == 0)
        #expect(!FileManager.default.fileExists(atPath: user.firefoxManifest))

        let foreign: [(String, () -> Void)] = [
            ("another host's name", { _ = FileManager.default.createFile(atPath: user.firefoxManifest, contents: Data(#"{"name":"org.example.other"}"#.utf8)) }),
            ("not JSON", { _ = FileManager.default.createFile(atPath: user.firefoxManifest, contents: Data("not json".utf8)) }),
            ("a symbolic link", { _ = try? FileManager.default.createSymbolicLink(atPath: user.firefoxManifest, withDestinationPath: user.chromiumManifest) }),
        ]
        for (name, make) in foreign {
            try? FileManager.default.removeItem(atPath: user.firefoxManifest)
            _ = try? FileManager.default.createDirectory(atPath: user.directory.file("home/.mozilla/native-messaging-hosts"), withIntermediateDirectories: true)
            make()
            let kept = try? FileManager.default.destinationOfSymbolicLink(atPath: user.firefoxManifest)
            let contents = FileManager.default.contents(atPath: user.firefoxManifest)
            let chromiumBefore = FileManager.default.contents(atPath: user.chromiumManifest)
            for action in ["install", "uninstall"] {
                let run = try user.cli.run("browser", action)
                #expect(run.status == 1 && run.stderr.contains("\(user.firefoxManifest) is not devtrust's host manifest"), "\(name), \(action): \(run)")
                #expect(FileManager.default.contents(atPath: user.firefoxManifest) == contents
                        && (try? FileManager.default.destinationOfSymbolicLink(atPath: user.firefoxManifest)) == kept, "\(name), \(action)")
                #expect(FileManager.default.contents(atPath: user.chromiumManifest) == chromiumBefore, "\(name), \(action): the other browser's was touched")
            }
        }
    }

    @Test func systemManifestsGoBelowARootForEveryUser() throws {
        let user = User()
        let root = TemporaryDirectory()
        let installed = try user.cli.run("browser", "install", "--system", "--root", root.path, "--json")
        #expect(installed.status == 0 && installed.stdout.contains(#""scope":"system""#), "\(installed)")
        let chromium = root.file("etc/chromium/native-messaging-hosts/dev.devtrust.host.json")
        let firefox = root.file("usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json")
        #expect(try Self.manifest(chromium)["path"] == .string(Self.binaryPath) && Self.mode(chromium) == 0o644)
        #expect(try Self.manifest(firefox)["allowed_extensions"] == .array([.string("host@devtrust.dev")]) && Self.mode(firefox) == 0o644)
        // Every user's browser reads them: the directories devtrust made are 0755.
        for directory in ["etc", "etc/chromium", "etc/chromium/native-messaging-hosts", "usr/lib/mozilla/native-messaging-hosts"] {
            #expect(Self.mode(root.file(directory)) == 0o755, "\(directory)")
        }
        #expect(user.tree().isEmpty, "the user's directories were touched: \(user.tree())")
        #expect(try user.cli.run("browser", "uninstall", "--system", "--root", root.path, "-q").status == 0)
        #expect(!FileManager.default.fileExists(atPath: chromium) && !FileManager.default.fileExists(atPath: firefox))
        #expect(!FileManager.default.fileExists(atPath: root.file("etc/chromium/native-messaging-hosts")))
        // The browser's own directory (a package's, system-wide) stays.
        #expect(FileManager.default.fileExists(atPath: root.file("etc/chromium")))
    }

    /// A user without the right to write the system's directories is told to use sudo.
    @Test(.enabled(if: getuid() == 0)) func systemInstallAsAUserNamesSudo() throws {
        let shared = TemporaryDirectory()
        chmod(shared.path, 0o755)
        let root = shared.file("root")
        mkdir(root, 0o755)
        let home = shared.file("home")
        mkdir(home, 0o700)
        chown(home, 65534, 65534)
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared.path)
        for action in ["install", "uninstall"] {
            if action == "uninstall" {
                // Something to remove: written as root.
                #expect(try User().cli.run("browser", "install", "--system", "--root", root, "-q").status == 0)
            }
            let result = try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", binary, "browser", action,
                                                                    "--system", "--root", root], environment: ["PATH": "/usr/bin:/bin", "HOME": home])
            #expect(result.status == 1, "\(action): \(result)")
            #expect(result.stderr.contains("Permission denied") && result.stderr.contains("sudo devtrust browser \(action) --system"), "\(action): \(result)")
        }
        #expect(FileManager.default.fileExists(atPath: shared.file("root/etc/chromium/native-messaging-hosts/dev.devtrust.host.json")))
    }

    /// Install says where the extension's files are: `share/devtrust/browser` beside an installed
    /// binary (`make install`), or a checkout's `browser/` above its build directory.
    @Test func installFindsTheExtensionBesideTheBinary() throws {
        let tree = TemporaryDirectory()
        // As /proc/self/exe gives it: no "//" (the temporary directory's path may have one).
        let real = { (path: String) in (path as NSString).standardizingPath }
        _ = tree.write("prefix/share/devtrust/browser/manifest.json", "{}")
        _ = tree.write("checkout/Package.swift", "")
        _ = tree.write("checkout/browser/manifest.json", "{}")
        for (place, expected) in [("prefix/bin", tree.file("prefix/share/devtrust/browser")), ("checkout/.build/x86_64-unknown-linux-gnu/debug", tree.file("checkout/browser")),
                                  ("elsewhere", nil)] {
            try FileManager.default.createDirectory(atPath: tree.file(place), withIntermediateDirectories: true)
            let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: tree.file(place))
            var user = User()
            user.cli = DevtrustBinary(keystore: user.cli.keystore, path: binary)
            user.cli.extraEnvironment = ["HOME": user.directory.file("home"), "XDG_CONFIG_HOME": user.directory.file("xdg")]
            let run = try user.cli.run("browser", "install", "--json")
            let report = try JSONParser.parse(run.stdout).objectValue
            #expect(run.status == 0 && report?["host"] == .string(real(binary)), "\(place): \(run)")
            #expect(report?["extension"]?.objectValue?["directory"] == expected.map { .string(real($0)) } ?? .null, "\(place): \(run)")
            if let expected {
                #expect(run.stderr.contains("Load unpacked: \(real(expected)) "), "\(place): \(run.stderr)")
            } else {
                #expect(run.stderr.contains("were not found beside this binary"), "\(place): \(run.stderr)")
            }
        }
    }

    @Test func usageErrors() throws {
        let user = User()
        for (arguments, message) in [
            (["browser"], "say what to do"),
            (["browser", "remove"], "no browser action \"remove\""),
            (["browser", "install", "--root", "/tmp"], "--root goes with --system"),
            (["browser", "install", "--system", "--chromium-dir", "/tmp/x"], "--chromium-dir is a user's"),
            (["browser", "install", "--chromium-dir", "relative"], "--chromium-dir must be an absolute path"),
            (["browser", "install", "--system", "--root", "/nonexistent-root"], "--root must be an existing directory"),
        ] {
            let run = try user.cli.run(arguments)
            #expect(run.status == 2 && run.stderr.contains(message), "\(arguments): \(run)")
        }
        #expect(user.tree().isEmpty)
    }
}
