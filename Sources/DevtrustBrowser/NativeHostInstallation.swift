import DevtrustConfig
import DevtrustErrors
import DevtrustSystem
import Glibc

/// Writing and removing the browsers' host manifests (`devtrust browser install|uninstall`): every
/// manifest is checked before any is written or removed, so that a file of someone else's stops the
/// whole run; and where the extension's files are, to load them.
package enum NativeHostInstallation {
    package enum Action: String, CaseIterable {
        case install, uninstall
    }

    /// What became of one manifest.
    package enum Outcome: String {
        case written, replaced, unchanged, removed, absent
    }

    /// Why nothing (or not everything) was installed or removed, and what to do.
    package struct Failure: ClassifiedError, CustomStringConvertible {
        package let description: String

        package var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
    }

    /// The manifests naming `hostPath`, each with its contents and what writing it will do; a
    /// manifest of another program's in a manifest's place stops the install before anything is written.
    package static func plan(_ manifests: [NativeHostManifest], hostPath: String, extensions: [BrowserExtensionID],
                             system: Bool) throws(Failure) -> [(manifest: NativeHostManifest, contents: [UInt8], outcome: Outcome)] {
        var planned = [(manifest: NativeHostManifest, contents: [UInt8], outcome: Outcome)]()
        for manifest in manifests {
            let contents = manifest.contents(hostPath: hostPath, extensions: extensions)
            switch try existing(manifest, system: system, action: .install) {
            case .none: planned.append((manifest, contents, .written))
            case let .devtrusts(bytes): planned.append((manifest, contents, bytes == contents ? .unchanged : .replaced))
            case let .foreign(why):
                throw Failure(description: "\(manifest.path) is not devtrust's host manifest (\(why)); nothing was installed: move it away, then run this again")
            }
        }
        return planned
    }

    /// Writes what `plan` planned (what is unchanged stays as it is).
    package static func write(_ planned: [(manifest: NativeHostManifest, contents: [UInt8], outcome: Outcome)], system: Bool) throws(Failure) {
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
    }

    /// What removing each manifest will do; another program's file in a manifest's place stops the
    /// uninstall before anything is removed.
    package static func planRemoval(_ manifests: [NativeHostManifest], system: Bool) throws(Failure) -> [(manifest: NativeHostManifest, outcome: Outcome)] {
        var planned = [(manifest: NativeHostManifest, outcome: Outcome)]()
        for manifest in manifests {
            switch try existing(manifest, system: system, action: .uninstall) {
            case .none: planned.append((manifest, .absent))
            // Edited since install or not: a manifest of this host's name would keep the browser starting it.
            case .devtrusts: planned.append((manifest, .removed))
            case let .foreign(why):
                throw Failure(description: "\(manifest.path) is not devtrust's host manifest (\(why)); nothing was removed: it is not devtrust's to delete")
            }
        }
        return planned
    }

    /// Removes what `planRemoval` found devtrust's.
    package static func remove(_ planned: [(manifest: NativeHostManifest, outcome: Outcome)], system: Bool) throws(Failure) {
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
    }

    private static func existing(_ manifest: NativeHostManifest, system: Bool, action: Action) throws(Failure) -> NativeHostManifest.Existing {
        do {
            return try manifest.existing()
        } catch {
            throw failure(error, system: system, action: action)
        }
    }

    private static func failure(_ error: FileWriteError, system: Bool, action: Action) -> Failure {
        guard error.needsPrivilege && system else { return Failure(description: error.description) }
        return Failure(description: "\(error); the system-wide manifests are root's: sudo devtrust browser \(action.rawValue) --system")
    }

    /// The extension's files: `PREFIX/share/devtrust/browser` beside an installed
    /// `PREFIX/bin/devtrust`, or a checkout's `browser/` above its `.build`.
    package static func findExtension(hostPath: String) -> String? {
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
    package static func pathInside(root: String, _ path: String) -> String {
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

    /// How to load the extension in each browser, from `directory` (nil: not found beside the binary).
    package static func loadingInstructions(_ directory: String?, browsers: [NativeHostManifest.Browser]) -> [String] {
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
