import DevtrustConfig
import DevtrustEncoding
import DevtrustErrors
import DevtrustSystem
import Glibc

/// `browser install|uninstall [--chromium] [--firefox] [--system]`: registers
/// devtrust as the browsers' native messaging host `dev.devtrust.host` (a
/// manifest naming this binary, which the browser then starts as `native-host`),
/// and says how to load the extension; `uninstall` removes those manifests.
enum BrowserCommand: DevtrustCommand {
    enum Action: String, CaseIterable {
        case install, uninstall
    }

    struct Options: CommandOptions {
        static let chromium = FlagOption<Self>("chromium", "Chromium's host manifest (neither flag: both browsers)")
        static let firefox = FlagOption<Self>("firefox", "Firefox's host manifest (neither flag: both browsers)")
        static let system = FlagOption<Self>("system", "for every user: /etc/chromium, /usr/lib/mozilla (as root)")
        static let chromiumDirectory = ValueOption<Self>("chromium-dir", "DIR", .directory,
                                                         "Chromium's user data directory (default $XDG_CONFIG_HOME/chromium)")
        static let root = ValueOption<Self>("root", "DIR", .directory,
                                            "with --system: below DIR instead of / (a staging tree; a binary below DIR is named as DIR's /)")
        static let spec = CommandSpec(name: "browser", summary: "install or uninstall the browsers' native messaging host for sign-in",
                                      positionalUsage: "install|uninstall", maximumPositionals: 1,
                                      positionalKind: .choice(Action.allCases.map(\.rawValue)),
                                      options: [chromium, firefox, system, chromiumDirectory, root])

        var action: String?
        var chromium: Bool
        var firefox: Bool
        var system: Bool
        var chromiumDirectory: String?
        var root: String?

        init(_ values: OptionValues<Self>) {
            action = values.positionals.first
            chromium = values[Self.chromium]
            firefox = values[Self.firefox]
            system = values[Self.system]
            chromiumDirectory = values[Self.chromiumDirectory]
            root = values[Self.root]
        }
    }

    /// What became of one manifest.
    enum Outcome: String {
        case written, replaced, unchanged, removed, absent
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let command = Options.spec.name
        guard let name = options.action else { throw UsageError("say what to do: devtrust browser install, or devtrust browser uninstall", command: command) }
        guard let action = Action(rawValue: name) else {
            throw UsageError("no browser action \"\(name)\": devtrust browser install, or devtrust browser uninstall", command: command)
        }
        if options.system && options.chromiumDirectory != nil {
            throw UsageError("--chromium-dir is a user's Chromium directory; --system writes Chromium's system-wide one", command: command)
        }
        if options.root != nil && !options.system {
            throw UsageError("--root goes with --system", command: command)
        }
        if let root = options.root, !root.hasPrefix("/") || FileReader.exists(root) == false {
            throw UsageError("--root must be an existing directory's absolute path, not \"\(root)\"", command: command)
        }
        if let directory = options.chromiumDirectory, !directory.hasPrefix("/") {
            throw UsageError("--chromium-dir must be an absolute path, not \"\(directory)\"", command: command)
        }
        let browsers = NativeHostManifest.Browser.allCases.filter {
            !(options.chromium || options.firefox) || ($0 == .chromium ? options.chromium : options.firefox)
        }
        let variables = context.environment.variables
        let root = options.root.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? ""
        let manifests = try browsers.map { browser throws(UsageError) in
            try NativeHostManifest.location(browser, scope: options.system ? .system : .user, home: variables["HOME"],
                                            configHome: variables["XDG_CONFIG_HOME"], chromiumDirectory: options.chromiumDirectory, root: root)
        }
        let checks = BrowserInstallChecks.current
        // Root writing a user's manifests would leave root's directories in that user's home,
        // which the user's browsers and programs then cannot use, nor the user remove.
        for manifest in manifests where manifest.scope == .user {
            if let (path, owner) = checks.foreignOwner(of: manifest.directory) {
                throw CLIError.failure("\(path) belongs to uid \(owner), not root: as root, devtrust browser \(name) would leave root's files "
                                       + "in another user's directories; run it as that user, or use --system to \(name) for every user")
            }
        }
        switch action {
        case .install: try install(context, manifests, system: options.system, root: root)
        case .uninstall: try uninstall(context, manifests, system: options.system)
        }
    }

    /// `root`: the tree the manifests go below ("" for /). A binary inside that tree (a
    /// package's maintainer script run with dpkg --root) is named by its path once the tree is /.
    private static func install(_ context: CommandContext, _ manifests: [NativeHostManifest], system: Bool, root: String) throws {
        guard let runningPath = context.environment.executablePath(), runningPath.hasPrefix("/") else {
            throw CLIError.failure("cannot tell where this devtrust binary is (/proc/self/exe), which the manifests must name")
        }
        let hostPath = pathInside(root: root, runningPath)
        if let problem = BrowserInstallChecks.current.hostProblem(runningPath, scope: system ? .system : .user) {
            throw CLIError.failure("the manifests would name \(hostPath), which the browsers run "
                                   + (system ? "as every user" : "as you") + ", but \(problem); nothing was installed: "
                                   + (system ? "install devtrust where only root can change it (`sudo make install`, or a package) and run that copy: "
                                       + "sudo /usr/local/bin/devtrust browser install --system"
                                       : "run a devtrust that only you or root can change (`make install`, or a package)"))
        }
        let extensions = BrowserExtensionID.devtrust + (try context.configuration().browserExtensionIDs)
        // Every manifest is checked before any is written: a file of someone else's stops the whole install.
        var planned = [(NativeHostManifest, [UInt8], Outcome)]()
        for manifest in manifests {
            let contents = manifest.contents(hostPath: hostPath, extensions: extensions)
            switch try checked(manifest, system: system, action: .install) {
            case .none: planned.append((manifest, contents, .written))
            case let .devtrusts(bytes): planned.append((manifest, contents, bytes == contents ? .unchanged : .replaced))
            case let .foreign(why):
                throw CLIError.failure("\(manifest.path) is not devtrust's host manifest (\(why)); nothing was installed: move it away, then run this again")
            }
        }
        for (manifest, contents, outcome) in planned where outcome != .unchanged {
            do throws(FileWriteError) {
                guard let directory = try FileWriter.openDirectory(manifest.directory, creatingWith: system ? 0o755 : 0o700) else {
                    throw FileWriteError(path: manifest.directory, operation: "create the directory", code: ENOENT)
                }
                try FileWriter.writeAtomically(NativeHostManifest.fileName, in: directory, contents, mode: 0o644)
            } catch {
                throw failure(error, system: system, action: .install)
            }
        }
        for (manifest, _, outcome) in planned {
            let scope = manifest.scope == .system ? "for every user" : "for this user"
            context.info("\(outcome == .unchanged ? "already in place" : outcome.rawValue): \(manifest.path) (\(manifest.browser.displayName), \(scope))")
        }
        let extensionDirectory = findExtension(hostPath: runningPath).map { pathInside(root: root, $0) }
        context.info("the browsers start \(hostPath) as the host (devtrust native-host); it serves only devtrust's extension"
                     + (extensions.count > BrowserExtensionID.devtrust.count ? " and the configuration's browser.extensionIds" : ""))
        for line in loadingInstructions(extensionDirectory, browsers: planned.map(\.0.browser)) { context.info(line) }
        if context.json {
            context.output(JSONWriter.string(.object([
                "action": .string("install"), "host": .string(hostPath),
                "manifests": .array(planned.map { manifestJSON($0.0, outcome: $0.2) }),
                "extension": .object(["directory": extensionDirectory.map(JSONValue.string) ?? .null,
                                      "chromiumId": .string(BrowserExtensionID.devtrust[0].description),
                                      "firefoxId": .string(BrowserExtensionID.devtrust[1].description)]),
            ])))
        }
    }

    private static func uninstall(_ context: CommandContext, _ manifests: [NativeHostManifest], system: Bool) throws {
        var planned = [(NativeHostManifest, Outcome)]()
        for manifest in manifests {
            switch try checked(manifest, system: system, action: .uninstall) {
            case .none: planned.append((manifest, .absent))
            // Edited since install or not: a manifest of this host's name would keep the browser starting it.
            case .devtrusts: planned.append((manifest, .removed))
            case let .foreign(why):
                throw CLIError.failure("\(manifest.path) is not devtrust's host manifest (\(why)); nothing was removed: it is not devtrust's to delete")
            }
        }
        for (manifest, outcome) in planned where outcome == .removed {
            do throws(FileWriteError) {
                let parent = try FileWriter.openDirectory(Self.parent(of: manifest.directory), creatingWith: nil)
                if let parent, let directory = try FileWriter.openDirectory(manifest.directory, creatingWith: nil) {
                    try FileWriter.remove(NativeHostManifest.fileName, in: directory)
                    // The hosts directory, once empty, serves nothing: removed, whoever made it. Nothing
                    // above it is: the browser's own directory, a user's --chromium-dir, ~/.mozilla.
                    FileWriter.removeIfEmpty(NativeHostManifest.hostsDirectoryName(manifest.directory), in: parent)
                }
            } catch {
                throw failure(error, system: system, action: .uninstall)
            }
        }
        for (manifest, outcome) in planned {
            context.info((outcome == .removed ? "removed: " : "not installed: ") + manifest.path + " (\(manifest.browser.displayName))")
        }
        if context.json {
            context.output(JSONWriter.string(.object([
                "action": .string("uninstall"), "manifests": .array(planned.map { manifestJSON($0.0, outcome: $0.1) }),
            ])))
        }
    }

    private static func checked(_ manifest: NativeHostManifest, system: Bool, action: Action) throws -> NativeHostManifest.Existing {
        do {
            return try manifest.existing()
        } catch {
            throw failure(error, system: system, action: action)
        }
    }

    private static func failure(_ error: FileWriteError, system: Bool, action: Action) -> CLIError {
        guard error.needsPrivilege && system else { return .failure(error.description) }
        return .failure("\(error); the system-wide manifests are root's: sudo devtrust browser \(action.rawValue) --system")
    }

    private static func manifestJSON(_ manifest: NativeHostManifest, outcome: Outcome) -> JSONValue {
        .object(["browser": .string(manifest.browser.rawValue), "scope": .string(manifest.scope.rawValue),
                 "path": .string(manifest.path), "result": .string(outcome.rawValue)])
    }

    /// The extension's files: `PREFIX/share/devtrust/browser` beside an installed
    /// `PREFIX/bin/devtrust`, or a checkout's `browser/` above its `.build`.
    static func findExtension(hostPath: String) -> String? {
        var directory = parent(of: hostPath)
        let installed = parent(of: directory) + "/share/devtrust/browser"
        if FileReader.exists(installed + "/manifest.json") { return installed }
        for _ in 0..<5 where directory != "/" && !directory.isEmpty {
            if FileReader.exists(directory + "/Package.swift") && FileReader.exists(directory + "/browser/manifest.json") {
                return directory + "/browser"
            }
            directory = parent(of: directory)
        }
        return nil
    }

    /// `path` as seen once `root` is /, when it is below `root`; else `path` itself.
    static func pathInside(root: String, _ path: String) -> String {
        guard !root.isEmpty, let resolved = realpath(root, nil) else { return path }
        defer { free(resolved) }
        let resolvedRoot = String(cString: resolved)
        guard resolvedRoot != "/", path.hasPrefix(resolvedRoot + "/") else { return path }
        return String(path.dropFirst(resolvedRoot.count))
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func loadingInstructions(_ directory: String?, browsers: [NativeHostManifest.Browser]) -> [String] {
        let chromiumID = BrowserExtensionID.devtrust[0].description
        let firefoxID = BrowserExtensionID.devtrust[1].description
        var lines = [directory.map { "the extension's files: \($0)" }
            ?? "the extension's files were not found beside this binary (PREFIX/share/devtrust/browser, installed by `make install`; browser/ in the source)"]
        let place = directory ?? "the extension's directory"
        if browsers.contains(.chromium) {
            lines.append("Chromium: chrome://extensions, Developer mode, Load unpacked: \(place) (ID \(chromiumID)); "
                         + "for every user, the ExtensionInstallForcelist or ExtensionSettings policy (docs/browser.md)")
        }
        if browsers.contains(.firefox) {
            lines.append("Firefox: about:debugging, This Firefox, Load Temporary Add-on: \(place)/manifest.json (ID \(firefoxID)); "
                         + "to keep it, policies.json's ExtensionSettings with a signed copy (docs/browser.md)")
        }
        return lines
    }
}
