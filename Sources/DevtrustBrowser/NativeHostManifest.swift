import DevtrustConfig
import DevtrustEncoding
import DevtrustErrors
import DevtrustSystem
import Glibc

/// A browser's native messaging host manifest for devtrust (`dev.devtrust.host.json`):
/// where it goes, what it says, and whether a file there is devtrust's.
package struct NativeHostManifest {
    package enum Browser: String, CaseIterable {
        case chromium, firefox

        package var displayName: String { self == .chromium ? "Chromium" : "Firefox" }
    }

    package enum Scope: String {
        case user, system
    }

    package static let hostName = "dev.devtrust.host"
    package static let fileName = hostName + ".json"

    package let browser: Browser
    package let scope: Scope
    /// The directory the browser reads host manifests from.
    package let directory: String

    package var path: String { directory + "/" + Self.fileName }

    /// The last component of a manifest directory (NativeMessagingHosts, native-messaging-hosts).
    package static func hostsDirectoryName(_ directory: String) -> String {
        String(directory.split(separator: "/").last ?? "")
    }

    /// The user's own directories: Chromium's below its user data directory
    /// (`$XDG_CONFIG_HOME/chromium`, or the one given), Firefox's in `~/.mozilla`.
    /// System-wide: Debian's (`/etc/chromium`, `/usr/lib/mozilla`) below `root`.
    package static func location(_ browser: Browser, scope: Scope, home: String?, configHome: String?, chromiumDirectory: String?,
                         root: String) throws(UsageError) -> NativeHostManifest {
        switch (browser, scope) {
        case (.chromium, .system):
            return NativeHostManifest(browser: browser, scope: scope, directory: root + "/etc/chromium/native-messaging-hosts")
        case (.firefox, .system):
            return NativeHostManifest(browser: browser, scope: scope, directory: root + "/usr/lib/mozilla/native-messaging-hosts")
        case (.chromium, .user):
            let userData: String
            if let chromiumDirectory {
                userData = chromiumDirectory
            } else if let configHome, configHome.hasPrefix("/") {
                userData = configHome + "/chromium"
            } else {
                userData = try homeDirectory(home) + "/.config/chromium"
            }
            return NativeHostManifest(browser: browser, scope: scope, directory: userData + "/NativeMessagingHosts")
        case (.firefox, .user):
            return NativeHostManifest(browser: browser, scope: scope, directory: try homeDirectory(home) + "/.mozilla/native-messaging-hosts")
        }
    }

    private static func homeDirectory(_ home: String?) throws(UsageError) -> String {
        guard let home, home.hasPrefix("/") else {
            throw UsageError("cannot tell where the browsers' user directories are: HOME is not set; set it, or use --system", command: "browser")
        }
        return home
    }

    /// The manifest: the host's name and path (an executable run with no
    /// arguments of ours: the browser adds the caller's), and who may start it.
    package func contents(hostPath: String, extensions: [BrowserExtensionID]) -> [UInt8] {
        var manifest: JSONObject = ["name": .string(Self.hostName), "description": .string("devtrust: device tokens for browser sign-in"),
                                    "path": .string(hostPath), "type": .string("stdio")]
        switch browser {
        case .chromium:
            let origins = extensions.compactMap { id -> String? in
                if case let .chromium(id) = id { return BrowserExtensionID.chromiumOrigin(id) }
                return nil
            }
            manifest["allowed_origins"] = .array(origins.map(JSONValue.string))
        case .firefox:
            let ids = extensions.compactMap { id -> String? in
                if case let .firefox(id) = id { return id }
                return nil
            }
            manifest["allowed_extensions"] = .array(ids.map(JSONValue.string))
        }
        return Array((JSONWriter.pretty(.object(manifest)) + "\n").utf8)
    }

    /// What is at the manifest's path now.
    package enum Existing: Equatable {
        case none
        /// A manifest for devtrust's host (`name` is `dev.devtrust.host`), with its bytes.
        case devtrusts([UInt8])
        /// Anything else: not a regular file, not JSON, another host's name.
        case foreign(String)
    }

    package func existing() throws(FileWriteError) -> Existing {
        switch try FileWriter.kind(of: path) {
        case nil:
            return .none
        case .regularFile?:
            let bytes: [UInt8]
            do {
                bytes = try FileReader.read(path, limit: 1 << 16)
            } catch {
                return .foreign("it cannot be read (\(error.reason))")
            }
            guard case let .object(manifest)? = try? JSONParser.parse(bytes) else { return .foreign("it is not a JSON object") }
            guard manifest["name"] == .string(Self.hostName) else {
                return .foreign("it names the host \(manifest["name"]?.stringValue.map { "\"\($0)\"" } ?? "(none)"), not \(Self.hostName)")
            }
            return .devtrusts(bytes)
        case .symbolicLink?:
            return .foreign("it is a symbolic link")
        case .directory?, .other?:
            return .foreign("it is not a regular file")
        }
    }
}
