import DevtrustBrowser
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
    typealias Action = NativeHostInstallation.Action

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
        let hostPath = NativeHostInstallation.pathInside(root: root, runningPath)
        if let problem = BrowserInstallChecks.current.hostProblem(runningPath, scope: system ? .system : .user) {
            throw CLIError.failure("the manifests would name \(hostPath), which the browsers run "
                                   + (system ? "as every user" : "as you") + ", but \(problem); nothing was installed: "
                                   + (system ? "install devtrust where only root can change it (`sudo make install`, or a package) and run that copy: "
                                       + "sudo /usr/local/bin/devtrust browser install --system"
                                       : "run a devtrust that only you or root can change (`make install`, or a package)"))
        }
        let extensions = BrowserExtensionID.devtrust + (try context.configuration().browserExtensionIDs)
        let planned = try NativeHostInstallation.plan(manifests, hostPath: hostPath, extensions: extensions, system: system)
        try NativeHostInstallation.write(planned, system: system)
        for (manifest, _, outcome) in planned {
            let scope = manifest.scope == .system ? "for every user" : "for this user"
            context.info("\(outcome == .unchanged ? "already in place" : outcome.rawValue): \(manifest.path) (\(manifest.browser.displayName), \(scope))")
        }
        let extensionDirectory = NativeHostInstallation.findExtension(hostPath: runningPath).map { NativeHostInstallation.pathInside(root: root, $0) }
        context.info("the browsers start \(hostPath) as the host (devtrust native-host); it serves only devtrust's extension"
                     + (extensions.count > BrowserExtensionID.devtrust.count ? " and the configuration's browser.extensionIds" : ""))
        for line in NativeHostInstallation.loadingInstructions(extensionDirectory, browsers: planned.map(\.manifest.browser)) { context.info(line) }
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
        let planned = try NativeHostInstallation.planRemoval(manifests, system: system)
        try NativeHostInstallation.remove(planned, system: system)
        for (manifest, outcome) in planned {
            context.info((outcome == .removed ? "removed: " : "not installed: ") + manifest.path + " (\(manifest.browser.displayName))")
        }
        if context.json {
            context.output(JSONWriter.string(.object([
                "action": .string("uninstall"), "manifests": .array(planned.map { manifestJSON($0.0, outcome: $0.1) }),
            ])))
        }
    }

    private static func manifestJSON(_ manifest: NativeHostManifest, outcome: NativeHostInstallation.Outcome) -> JSONValue {
        .object(["browser": .string(manifest.browser.rawValue), "scope": .string(manifest.scope.rawValue),
                 "path": .string(manifest.path), "result": .string(outcome.rawValue)])
    }
}
