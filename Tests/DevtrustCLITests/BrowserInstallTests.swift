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

    /// Uninstall removes the manifests and the hosts directories once empty, and nothing above them:
    /// the browser's own directory (~/.mozilla, Chromium's) may be there before install, or made by it.
    @Test func uninstallRemovesTheManifestsAndTheHostsDirectoriesOnly() throws {
        let user = User()
        #expect(try user.cli.run("browser", "install", "-q").status == 0)
        let removed = try user.cli.run("browser", "uninstall", "--json")
        #expect(removed.status == 0 && removed.stdout.components(separatedBy: #""result":"removed""#).count == 3, "\(removed)")
        #expect(user.tree() == ["home/.mozilla", "xdg/chromium"], "\(user.tree())")
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

    /// A package's maintainer script under `dpkg --root DIR` runs DIR/usr/bin/devtrust with
    /// `--root DIR`: the manifests name /usr/bin/devtrust, where the binary is once DIR is /,
    /// and the checks still look at the binary that runs. The root is named through a link.
    @Test(.enabled(if: getuid() == 0)) func aBinaryBelowTheRootIsNamedAsTheRootSeesIt() throws {
        let scratch = TemporaryDirectory()
        chmod(scratch.path, 0o755)
        let root = scratch.file("root")
        try FileManager.default.createDirectory(atPath: root + "/usr/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/usr/share/devtrust/browser", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: root + "/usr/share/devtrust/browser/manifest.json", contents: Data("{}".utf8))
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: root + "/usr/bin")
        symlink(root, scratch.file("link"))
        let cli = DevtrustBinary(keystore: scratch.file("ks"), path: binary)
        let installed = try cli.run("browser", "install", "--system", "--root", scratch.file("link") + "/", "--json")
        #expect(installed.status == 0, "\(installed)")
        let report = try #require(try JSONParser.parse(installed.stdout).objectValue)
        #expect(report["host"] == .string("/usr/bin/devtrust"), "\(report)")
        #expect(report["extension"]?.objectValue?["directory"] == .string("/usr/share/devtrust/browser"), "\(report)")
        for manifest in ["etc/chromium/native-messaging-hosts", "usr/lib/mozilla/native-messaging-hosts"] {
            #expect(try Self.manifest(root + "/" + manifest + "/dev.devtrust.host.json")["path"] == .string("/usr/bin/devtrust"), "\(manifest)")
        }
        // A binary outside the root is still named by its own path.
        let outside = TemporaryDirectory()
        #expect(try User().cli.run("browser", "install", "--system", "--root", outside.path, "-q").status == 0)
        #expect(try Self.manifest(outside.file("etc/chromium/native-messaging-hosts/dev.devtrust.host.json"))["path"] == .string(Self.binaryPath))
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

    /// Empty directories that were there before install stay after uninstall: the browsers' own, and a --chromium-dir.
    @Test func uninstallKeepsTheDirectoriesItFound() throws {
        let user = User()
        let profile = user.directory.file("profile")
        for directory in ["home/.mozilla", "xdg/chromium", "profile"] { mkdir(user.directory.file(directory), 0o700) }
        #expect(try user.cli.run("browser", "install", "-q").status == 0)
        #expect(try user.cli.run("browser", "install", "--chromium", "--chromium-dir", profile, "-q").status == 0)
        #expect(try user.cli.run("browser", "uninstall", "-q").status == 0)
        #expect(try user.cli.run("browser", "uninstall", "--chromium", "--chromium-dir", profile, "-q").status == 0)
        #expect(user.tree() == ["home/.mozilla", "xdg/chromium"], "\(user.tree())")
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: profile, isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(!FileManager.default.fileExists(atPath: profile + "/NativeMessagingHosts"))
    }

    /// A directory that another user may write (a staging tree of theirs), for root's install
    /// below it, and the directory outside that its links point to.
    struct ForeignTree {
        static let nobody: uid_t = 65534
        let directory = TemporaryDirectory()
        var stage: String { directory.file("stage") }
        var target: String { directory.file("target") }

        init() {
            chmod(directory.path, 0o755)
            mkdir(stage, 0o755)
            chown(stage, Self.nobody, Self.nobody)
            mkdir(target, 0o700)
        }

        /// Everything below the target, which must stay empty.
        var targetContents: [String] { (try? FileManager.default.contentsOfDirectory(atPath: target)) ?? ["(unreadable)"] }
    }

    /// A link that another user put in the tree is not followed: root's install would otherwise
    /// write (and set modes) wherever that user points it.
    @Test(.enabled(if: getuid() == 0)) func systemInstallDoesNotFollowAnotherUsersLink() throws {
        let tree = ForeignTree()
        symlink(tree.target, tree.stage + "/etc")
        lchown(tree.stage + "/etc", ForeignTree.nobody, ForeignTree.nobody)
        let run = try User().cli.run("browser", "install", "--system", "--root", tree.stage, "--chromium")
        #expect(run.status == 1 && run.stderr.contains("symbolic link in a directory that another user owns or may write"), "\(run)")
        #expect(tree.targetContents.isEmpty && BrowserInstallTests.mode(tree.target) == 0o700, "\(tree.targetContents)")
    }

    /// The reviewer's race: another user swaps each directory root's install makes for a link
    /// (rmdir, symlink) in the moment between mkdir and setting its mode. The install may fail,
    /// but never changes anything outside the tree.
    @Test(.enabled(if: getuid() == 0)) func systemInstallRacingAnotherUserChangesNothingOutsideTheTree() throws {
        let tree = ForeignTree()
        let racer = """
        import os, sys, time
        stage, target, end = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
        names = [stage + "/etc", stage + "/etc/chromium", stage + "/etc/chromium/native-messaging-hosts"]
        while time.time() < end:
            for name in names:
                try:
                    os.rmdir(name)
                    os.symlink(target, name)
                except OSError:
                    pass
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", racer, tree.stage, tree.target, "600"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let user = User()
        var outcomes = [Int32: Int]()
        for attempt in 0..<150 {
            let run = try user.cli.run("browser", "install", "--system", "--root", tree.stage, "--chromium", "-q")
            outcomes[run.status, default: 0] += 1
            #expect(run.status == 0 || run.status == 1, "attempt \(attempt): \(run)")
            let mode = BrowserInstallTests.mode(tree.target)
            guard mode == 0o700 && tree.targetContents.isEmpty else {
                Issue.record("attempt \(attempt): the target outside the tree is now mode \(String(mode, radix: 8)), holding \(tree.targetContents)")
                break
            }
            try? FileManager.default.removeItem(atPath: tree.stage + "/etc")
        }
        #expect(process.isRunning, "the racer ended early: \(outcomes)")
    }

    /// The system-wide manifests name a binary that every user's browser runs: one that another
    /// user owns or may write (or whose directories they may) is refused, and so, for a user's own
    /// manifests, is one that someone else than that user and root could replace.
    @Test(.enabled(if: getuid() == 0)) func installRefusesABinaryOthersCouldReplace() throws {
        let tree = TemporaryDirectory()
        chmod(tree.path, 0o755)
        let root = tree.file("root")
        mkdir(root, 0o755)
        func binary(in place: String, directoryMode: mode_t, directoryOwner: uid_t = 0, directoryGroup: gid_t = 0, binaryOwner: uid_t = 0) -> String {
            mkdir(tree.file(place), directoryMode)
            chown(tree.file(place), directoryOwner, directoryGroup)
            chmod(tree.file(place), directoryMode)
            let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: tree.file(place))
            chown(binary, binaryOwner, binaryOwner)
            chmod(binary, 0o755)
            return binary
        }
        let cases = [
            ("a user's binary", binary(in: "users-binary", directoryMode: 0o755, binaryOwner: 65534), "belongs to uid 65534"),
            ("in a user's directory", binary(in: "users-directory", directoryMode: 0o755, directoryOwner: 65534, directoryGroup: 65534), "users-directory belongs to uid 65534"),
            ("in a directory another group may write", binary(in: "group-writable", directoryMode: 0o775, directoryGroup: 65534), "may be written by group 65534"),
            ("in a world-writable directory", binary(in: "world-writable", directoryMode: 0o777), "may be written by every user"),
        ]
        for (name, path, reason) in cases {
            var user = User()
            user.cli = DevtrustBinary(keystore: user.cli.keystore, path: path)
            user.cli.extraEnvironment = ["HOME": user.directory.file("home"), "XDG_CONFIG_HOME": user.directory.file("xdg")]
            for scope in [["--system", "--root", root], []] {
                let run = try user.cli.run(["browser", "install"] + scope)
                #expect(run.status == 1 && run.stderr.contains(reason) && run.stderr.contains("nothing was installed"), "\(name) \(scope): \(run)")
                if !scope.isEmpty { #expect(run.stderr.contains("sudo make install"), "\(name): \(run)") }
            }
            #expect(user.tree().isEmpty, "\(name): \(user.tree())")
        }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: root)) == [])
        // Root's binary in root's 0755 directories is named (a sticky /tmp above them is no matter).
        var user = User()
        user.cli = DevtrustBinary(keystore: user.cli.keystore, path: binary(in: "roots", directoryMode: 0o755))
        user.cli.extraEnvironment = ["HOME": user.directory.file("home"), "XDG_CONFIG_HOME": user.directory.file("xdg")]
        let run = try user.cli.run("browser", "install", "--system", "--root", root, "-q")
        #expect(run.status == 0, "\(run)")
    }

    /// Root installing into a user's home (sudo -E keeps HOME) would leave root's directories there,
    /// which break that user's browsers and which the user cannot remove: refused, nothing written.
    @Test(.enabled(if: getuid() == 0)) func rootDoesNotWriteIntoAnotherUsersHome() throws {
        let user = User()
        for directory in ["home", "xdg"] { chown(user.directory.file(directory), 65534, 65534) }
        for action in ["install", "uninstall"] {
            let run = try user.cli.run("browser", action)
            #expect(run.status == 1 && run.stderr.contains("belongs to uid 65534, not root") && run.stderr.contains("run it as that user, or use --system"),
                    "\(action): \(run)")
        }
        #expect(user.tree().isEmpty, "\(user.tree())")
        // A --chromium-dir of another user's is the same.
        let profile = user.directory.file("profile")
        mkdir(profile, 0o700)
        chown(profile, 65534, 65534)
        let run = try user.cli.run("browser", "install", "--chromium", "--chromium-dir", profile)
        #expect(run.status == 1 && run.stderr.contains("\(profile) belongs to uid 65534"), "\(run)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: profile)) == [])
    }

    /// `make install` fails when a copy of the extension fails (here share/devtrust is a file).
    @Test func makeInstallFailsWhenTheExtensionCannotBeCopied() throws {
        let tree = TemporaryDirectory()
        _ = tree.write("extension/manifest.json", "{}")
        _ = tree.write("extension/icons/icon.png", "png")
        // make's environment, with a keystore, cache and configuration of the test's own for the
        // binary it runs (`devtrust completion`): as root, the defaults are the machine's.
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("DEVTRUST_") }
            .merging(OwnDirectories.variables(in: tree.file("devtrust"))) { $1 }
        let make = { (destination: String) throws -> ProcessResult in
            // -o build: the release binary is there already; this is about the copy.
            try ProcessRunner.run("/usr/bin/make", ["-s", "-C", Repository.path(""), "-o", "build", "install", "DESTDIR=" + destination, "PREFIX=/usr",
                                                    "BROWSER_SOURCE=" + tree.file("extension")], environment: environment)
        }
        let good = try make(tree.file("good"))
        #expect(good.status == 0, "\(good)")
        #expect(FileManager.default.contents(atPath: tree.file("good/usr/share/devtrust/browser/icons/icon.png")) == Data("png".utf8))
        #expect(BrowserInstallTests.mode(tree.file("good/usr/share/devtrust/browser/manifest.json")) == 0o644)
        #expect(BrowserInstallTests.mode(tree.file("good/usr/share/devtrust/browser/icons")) == 0o755)
        _ = tree.write("bad/usr/share/devtrust", "a file where a directory goes")
        let bad = try make(tree.file("bad"))
        #expect(bad.status != 0 && !bad.stdout.contains("installed the browser extension"), "\(bad)")
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
