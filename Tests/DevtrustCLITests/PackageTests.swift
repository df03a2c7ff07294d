import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// The Debian package (issue 18), built by `make deb`'s script from the release binary
/// `make test` builds: what lintian says of it, its dependencies against what the binary
/// links and loads, and the package installed with dpkg into a scratch root, where the
/// binary, the man page and each shell's completion work, and purging leaves no file of
/// the package's behind and every keystore as it was. `make install` installs the same files.
@Suite struct PackageTests {
    static let release = Repository.path(".build/release/devtrust")

    /// dpkg, debhelper and chroot need root; on CI all of it must be there.
    static let shouldRun = ExternalTool.isCI || (getuid() == 0 && DevtrustBinary.isNewerThanTheSources(release)
        && ["/usr/bin/dpkg-buildpackage", "/usr/bin/dh", "/usr/bin/lintian", "/usr/sbin/chroot"].allSatisfy(FileManager.default.isExecutableFile(atPath:)))

    /// The package, built once for the suite (scripts/build-deb.sh, as `make deb` runs it after `make build`).
    struct Built: Sendable {
        let directory: TemporaryDirectory
        let path: String
        let version: String
        let buildOutput: ProcessResult

        static let shared: Result<Built, any Error> = Result {
            let version = try ProcessRunner.run(release, ["--version"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "devtrust ", with: "")
            let directory = TemporaryDirectory("deb")
            let result = try ProcessRunner.run(Repository.path("scripts/build-deb.sh"), [release, directory.file("out")],
                                               environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"])
            let path = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
            return Built(directory: directory, path: path, version: version, buildOutput: result)
        }

        static func get() throws -> Built {
            let built = try shared.get()
            try #require(built.buildOutput.status == 0, "\(built.buildOutput)")
            return built
        }

        func field(_ name: String) throws -> String {
            try ProcessRunner.run("/usr/bin/dpkg-deb", ["--field", path, name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// The package's files (not its directories), as absolute paths.
        func files() throws -> Set<String> {
            let listing = try ProcessRunner.run("/usr/bin/dpkg-deb", ["--contents", path])
            #expect(listing.status == 0, "\(listing)")
            return Set(listing.stdout.split(separator: "\n").filter { !$0.hasPrefix("d") }.compactMap { line in
                line.split(separator: " ", omittingEmptySubsequences: true).last.map { String($0.dropFirst()) }
            })
        }
    }

    static func packages(_ field: String) -> Set<String> {
        Set(field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? "" })
    }

    /// The Debian package that holds a library, found by its soname in the system's dpkg database.
    static func owner(ofLibrary soname: String) throws -> String {
        let found = try ProcessRunner.run("/usr/bin/dpkg-query", ["--search", "*/" + soname])
        try #require(found.status == 0, "no installed package holds \(soname): \(found)")
        return String(found.stdout.prefix { $0 != ":" })
    }

    // MARK: - The package

    @Test(.enabled(if: shouldRun))
    func makeDebBuildsAPackageNamedByTheVersionThatLintianPasses() throws {
        let built = try Built.get()
        let architecture = try ProcessRunner.run("/usr/bin/dpkg", ["--print-architecture"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(built.version.first?.isNumber == true, "\(built.version)")
        // The path is the last line printed.
        #expect(built.path.hasSuffix("/out/devtrust_\(built.version)_\(architecture).deb") && FileManager.default.fileExists(atPath: built.path),
                "\(built.buildOutput)")
        #expect(try built.field("Version") == built.version)
        #expect(try built.field("Package") == "devtrust")

        // Errors and warnings both fail; each remaining tag is overridden in
        // debian/devtrust.lintian-overrides with its reason.
        let lintian = try ProcessRunner.run("/usr/bin/lintian", ["--fail-on", "error,warning", built.path],
                                            environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"])
        #expect(lintian.status == 0, "\(lintian)")
        #expect(!lintian.stdout.split(separator: "\n").contains { $0.hasPrefix("E:") || $0.hasPrefix("W:") }, "\(lintian)")

        let files = try built.files()
        for expected in ["/usr/bin/devtrust", "/usr/share/man/man1/devtrust.1.gz",
                         "/usr/share/bash-completion/completions/devtrust", "/usr/share/zsh/vendor-completions/_devtrust",
                         "/usr/share/fish/vendor_completions.d/devtrust.fish", "/usr/share/devtrust/browser/manifest.json",
                         "/etc/chromium/native-messaging-hosts/dev.devtrust.host.json",
                         "/usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json", "/etc/devtrust/config.json.example",
                         "/usr/share/doc/devtrust/copyright", "/usr/share/doc/devtrust/changelog.gz", "/usr/share/doc/devtrust/README.md.gz"] {
            #expect(files.contains(expected), "\(expected) is not in the package: \(files.sorted())")
        }
        // Every file of the extension's directory, whatever it holds now.
        let extensionFiles = try FileManager.default.contentsOfDirectory(atPath: Repository.path("browser"))
        #expect(Set(extensionFiles.map { "/usr/share/devtrust/browser/" + $0 }).isSubset(of: files))
    }

    /// Depends: the package of every library the binary links (libc; libcrypto when it is
    /// dynamic). Recommends: the package of every library devtrust dlopens, by the soname in
    /// its C shims, and the default TCTI's; nothing else.
    @Test(.enabled(if: shouldRun))
    func theDependenciesAreTheLibrariesTheBinaryLinksAndLoads() throws {
        let built = try Built.get()
        let objdump = try ProcessRunner.run("/usr/bin/objdump", ["-p", Self.release])
        let needed = objdump.stdout.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            return words.count == 2 && words[0] == "NEEDED" ? String(words[1]) : nil
        }
        #expect(needed.contains("libc.so.6"), "\(objdump)")
        let depends = Self.packages(try built.field("Depends"))
        for library in needed {
            let package = try Self.owner(ofLibrary: library)
            #expect(depends.contains(package), "\(library) (\(package)) is not in Depends: \(depends)")
        }

        var loaded = ["libtss2-tcti-device.so.0"]
        for header in ["Sources/CTPM2/include/devtrust_tpm2.h", "Sources/CCurl/include/devtrust_curl.h", "Sources/CQRCode/include/devtrust_qrcode.h"] {
            let text = try String(contentsOfFile: Repository.path(header), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("#define DEVTRUST_") && line.contains("_LIBRARY \"") {
                loaded.append(String(line.split(separator: "\"")[1]))
            }
        }
        #expect(loaded.count == 7, "\(loaded)")
        let recommends = Self.packages(try built.field("Recommends"))
        #expect(recommends == Set(try loaded.map(Self.owner(ofLibrary:))), "\(loaded) -> \(recommends)")
        #expect(depends.isDisjoint(with: recommends))
        #expect(Self.packages(try built.field("Suggests")).isSuperset(of: ["tpm2-tools", "swtpm"]))
    }

    // MARK: - Installed with dpkg

    /// A directory that dpkg installs into (`--root`), which commands see as `/` in a
    /// chroot: the host's libraries are bound read-only into it in a mount namespace of
    /// the command's own, so nothing of them is in the root's listing and no mount
    /// outlives the command.
    struct ScratchRoot {
        let directory = TemporaryDirectory("root")
        var path: String { directory.path }
        static let user: uid_t = 4242
        static let multiarch = (try? ProcessRunner.run("/usr/bin/dpkg-architecture", ["-qDEB_HOST_MULTIARCH"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? ""

        init() throws {
            let manager = FileManager.default
            for directory in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/cache", "usr/lib/\(Self.multiarch)", "usr/lib64", "proc", "dev", "tmp", "home/alice"] {
                try manager.createDirectory(atPath: self.directory.file(directory), withIntermediateDirectories: true)
            }
            for file in ["var/lib/dpkg/status", "var/lib/dpkg/available"] { _ = manager.createFile(atPath: self.directory.file(file), contents: nil) }
            // Debian's merged /usr: the loader is /lib64/ld-linux-x86-64.so.2.
            try manager.createSymbolicLink(atPath: directory.file("lib"), withDestinationPath: "usr/lib")
            try manager.createSymbolicLink(atPath: directory.file("lib64"), withDestinationPath: "usr/lib64")
            chmod(directory.path, 0o755)
            chmod(directory.file("tmp"), 0o1777)
            chown(directory.file("home/alice"), Self.user, Self.user)
            chmod(directory.file("home/alice"), 0o700)
        }

        /// dpkg on the root. The package's one maintainer script (postrm) runs from the host
        /// with DPKG_ROOT set (--force-script-chrootless): the scratch root has no shell to run it
        /// chrooted. libc6 and the rest are the host's, not in the root's database (--force-depends).
        func dpkg(_ arguments: [String]) throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/dpkg", ["--root=\(path)", "--force-script-chrootless", "--force-depends"] + arguments,
                                  environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"])
        }

        /// A command run chrooted in the root, as root or as alice (uid 4242, HOME /home/alice).
        func run(asAlice: Bool = false, _ arguments: [String]) throws -> ProcessResult {
            let script = """
                set -e
                root=$1; shift
                for library in /usr/lib/\(Self.multiarch) /usr/lib64; do
                    mount --bind "$library" "$root$library"
                    mount -o remount,bind,ro "$root$library"
                done
                mount --bind /proc "$root/proc"
                mount --bind /dev "$root/dev"
                exec /usr/sbin/chroot "$@"
                """
            let chroot = (asAlice ? ["--userspec=\(Self.user):\(Self.user)"] : []) + [path] + arguments
            return try ProcessRunner.run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", path] + chroot,
                                         environment: ["PATH": "/usr/bin:/bin", "HOME": asAlice ? "/home/alice" : "/root", "LANG": "C.UTF-8"])
        }

        /// Every path in the root, dpkg's own database aside.
        func listing() -> Set<String> {
            let all = FileManager.default.enumerator(atPath: path)?.allObjects as? [String] ?? []
            return Set(all.filter { !$0.hasPrefix("var/lib/dpkg/") })
        }

        /// The files below `directory` in the root, with their bytes.
        func contents(below directory: String) -> [String: [UInt8]] {
            var found = [String: [UInt8]]()
            for name in FileManager.default.enumerator(atPath: self.directory.file(directory))?.allObjects as? [String] ?? [] {
                if let data = FileManager.default.contents(atPath: self.directory.file(directory + "/" + name)) { found[name] = Array(data) }
            }
            return found
        }
    }

    /// Completes `devtrust reg` in a real bash, zsh and fish, each loading the script the
    /// way it loads a package's: bash-completion's loader from XDG_DATA_DIRS, zsh's compinit
    /// from fpath, fish's autoloading from fish_complete_path.
    static func completions(in root: String, scratch: TemporaryDirectory) throws -> [String: [String]] {
        let environment = ["PATH": root + "/usr/bin:/usr/bin:/bin", "HOME": scratch.path, "TERM": "xterm", "LANG": "C.UTF-8"]
        let bash = try ProcessRunner.run(ExternalTool.bash.rawValue, ["--norc", "--noprofile", "-c", """
            source /usr/share/bash-completion/bash_completion
            __load_completion devtrust
            spec=$(complete -p devtrust) || exit 9
            function=${spec#*-F }; function=${function%% *}
            COMP_WORDS=(devtrust reg); COMP_CWORD=1; COMP_LINE='devtrust reg'; COMP_POINT=${#COMP_LINE}
            "$function" devtrust reg devtrust
            printf '%s\\n' "${COMPREPLY[@]}"
            """], environment: environment.merging(["XDG_DATA_DIRS": root + "/usr/share"]) { $1 })
        let zsh = try ProcessRunner.run(ExternalTool.zsh.rawValue, ["-f", Repository.path("Tests/Interop/zsh_complete.zsh"),
                                                                    root + "/usr/share/zsh/vendor-completions", "devtrust reg", scratch.file("zcompdump")],
                                        environment: environment)
        let fish = try ProcessRunner.run(ExternalTool.fish.rawValue, ["--no-config", "-c",
                                                                      "set -g fish_complete_path \(root)/usr/share/fish/vendor_completions.d; complete -C 'devtrust reg'"],
                                         environment: environment)
        var offered = [String: [String]]()
        for (shell, result) in [("bash", bash), ("zsh", zsh), ("fish", fish)] {
            #expect(result.status == 0, "\(shell): \(result)")
            offered[shell] = result.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }.filter { !$0.isEmpty }
        }
        return offered
    }

    @Test(.enabled(if: shouldRun && ExternalTool.python.shouldRun && ExternalTool.zsh.shouldRun && ExternalTool.fish.shouldRun))
    func theInstalledPackageWorksAndPurgingLeavesOnlyTheKeystores() throws {
        let built = try Built.get()
        let root = try ScratchRoot()
        let before = root.listing()

        let install = try root.dpkg(["--install", built.path])
        #expect(install.status == 0, "\(install)")

        // The binary, root's keystore in /var/lib/devtrust, a token python3-cryptography accepts.
        let version = try root.run(["/usr/bin/devtrust", "--version"])
        #expect(version.status == 0 && version.stdout == "devtrust \(built.version)\n", "\(version)")
        let initialised = try root.run(["/usr/bin/devtrust", "init", "--backend", "software"])
        #expect(initialised.status == 0 && initialised.stderr.contains("/var/lib/devtrust/"), "\(initialised)")
        let token = try root.run(["/usr/bin/devtrust", "token", "--device-id", "package-test"])
        let spki = try root.run(["/usr/bin/devtrust", "pubkey"])
        #expect(token.status == 0 && spki.status == 0, "\(token)\n\(spki)")
        let request: JSONObject = ["spki": .string(spki.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "der": .array([]),
                                   "jws": .array([.string(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))])]
        let verified = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(try JSONParser.parse(verified.stdout).objectValue?["jws"]?.objectValue?["valid"] == .integer(1), "\(verified)")
        // A user's keystore in their home; the example configuration is one devtrust accepts.
        let alice = try root.run(asAlice: true, ["/usr/bin/devtrust", "init", "--backend", "software"])
        #expect(alice.status == 0 && alice.stderr.contains("/home/alice/.local/share/devtrust/"), "\(alice)")
        let configured = try root.run(asAlice: true, ["/usr/bin/devtrust", "--config", "/etc/devtrust/config.json.example", "--json", "doctor"])
        #expect(configured.stdout.contains(#""id":"config.valid","title":"configuration file","verdict":"pass""#), "\(configured)")
        // The host manifests are the ones the installed binary writes.
        let browser = try root.run(["/usr/bin/devtrust", "browser", "install", "--system"])
        #expect(browser.status == 0, "\(browser)")
        #expect(browser.stderr.contains("already in place: /etc/chromium/native-messaging-hosts/dev.devtrust.host.json"), "\(browser)")
        #expect(browser.stderr.contains("already in place: /usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json"), "\(browser)")

        // man finds the page below the root's man directory.
        let man = try ProcessRunner.run("/usr/bin/man", ["-M", root.path + "/usr/share/man", "-w", "devtrust"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(man.status == 0 && man.stdout == root.path + "/usr/share/man/man1/devtrust.1.gz\n", "\(man)")
        let page = try ProcessRunner.run("/usr/bin/man", ["-M", root.path + "/usr/share/man", "devtrust"],
                                         environment: ["PATH": "/usr/bin:/bin", "MANWIDTH": "80", "LANG": "C.UTF-8", "MANPAGER": "cat", "PAGER": "cat"])
        #expect(page.status == 0 && page.stdout.contains("EXAMPLES"), "\(page)")

        let scratch = TemporaryDirectory("shells")
        let offered = try Self.completions(in: root.path, scratch: scratch)
        #expect(offered == ["bash": ["register"], "zsh": ["register"], "fish": ["register"]], "\(offered)")

        // Purging: the package's files and root's posture cache go; the keystores stay, byte for byte.
        let keystores = ["var/lib/devtrust", "home/alice/.local/share/devtrust"]
        let kept = keystores.map { root.contents(below: $0) }
        #expect(kept.allSatisfy { $0["keystore.json"] != nil }, "\(kept.map(\.keys))")
        #expect(FileManager.default.fileExists(atPath: root.directory.file("var/cache/devtrust")))
        let purge = try root.dpkg(["--purge", "devtrust"])
        #expect(purge.status == 0, "\(purge)")
        #expect(keystores.map { root.contents(below: $0) } == kept)
        let userData: Set<String> = ["var/lib/devtrust", "home/alice/.local", "home/alice/.local/share", "home/alice/.local/share/devtrust",
                                     "home/alice/.cache", "home/alice/.cache/devtrust"]
        let left = root.listing().filter { path in !userData.contains { path == $0 || path.hasPrefix($0 + "/") } }
        #expect(left == before, "left behind: \(left.subtracting(before).sorted()); removed: \(before.subtracting(left).sorted())")
        let records = try FileManager.default.contentsOfDirectory(atPath: root.directory.file("var/lib/dpkg/info"))
        #expect(!records.contains { $0.hasPrefix("devtrust.") }, "\(records)")

        // `browser uninstall --system` removes the package's manifests; dpkg still removes the rest cleanly.
        let again = try root.dpkg(["--install", built.path])
        #expect(again.status == 0, "\(again)")
        let uninstalled = try root.run(["/usr/bin/devtrust", "browser", "uninstall", "--system"])
        #expect(uninstalled.status == 0 && uninstalled.stderr.components(separatedBy: "removed: ").count == 3, "\(uninstalled)")
        let secondPurge = try root.dpkg(["--purge", "devtrust"])
        #expect(secondPurge.status == 0, "\(secondPurge)")
        let leftAgain = root.listing().filter { path in !userData.contains { path == $0 || path.hasPrefix($0 + "/") } }
        #expect(leftAgain == before, "left behind: \(leftAgain.subtracting(before).sorted())")
        #expect(keystores.map { root.contents(below: $0) } == kept)
    }

    // MARK: - make install

    /// `make install`'s files are the package's, save what only the package has (the host
    /// manifests, which `browser install --system` writes after `make install`; the Debian
    /// changelog; lintian's overrides) and the compression dh_compress adds; `make uninstall`
    /// removes every one. Below /usr/local, zsh's go to site-functions, the example still to /etc.
    @Test(.enabled(if: shouldRun))
    func makeInstallInstallsThePackagesFilesAndUninstallRemovesThem() throws {
        let built = try Built.get()
        let packageOnly: Set<String> = ["/etc/chromium/native-messaging-hosts/dev.devtrust.host.json",
                                        "/usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json",
                                        "/usr/share/doc/devtrust/changelog.gz", "/usr/share/lintian/overrides/devtrust"]
        let packaged = Set(try built.files().subtracting(packageOnly).map { path in
            path.hasSuffix("/devtrust.1.gz") || path.hasSuffix("/README.md.gz") ? String(path.dropLast(3)) : path
        })
        for prefix in ["/usr", "/usr/local"] {
            let destination = TemporaryDirectory("install")
            let variables = ["PREFIX=\(prefix)", "DESTDIR=\(destination.path)", "INSTALL_BINARY=\(Self.release)"]
            let install = try ProcessRunner.run("/usr/bin/make", ["-C", Repository.path(""), "--no-print-directory", "install-files"] + variables,
                                                environment: ["PATH": "/usr/bin:/bin"])
            #expect(install.status == 0, "\(install)")
            let installed = Self.files(below: destination.path)
            let expected = Set(packaged.map { path in
                guard prefix != "/usr", path.hasPrefix("/usr/") else { return path }
                return prefix + String(path.dropFirst(4)).replacingOccurrences(of: "/zsh/vendor-completions/", with: "/zsh/site-functions/")
            })
            #expect(installed == expected, "\(prefix): only installed: \(installed.subtracting(expected).sorted()); only packaged: \(expected.subtracting(installed).sorted())")
            let uninstall = try ProcessRunner.run("/usr/bin/make", ["-C", Repository.path(""), "--no-print-directory", "uninstall"] + variables,
                                                  environment: ["PATH": "/usr/bin:/bin"])
            #expect(uninstall.status == 0, "\(uninstall)")
            #expect(Self.files(below: destination.path).isEmpty, "\(prefix): \(Self.files(below: destination.path).sorted())")
        }
    }

    /// Files and links (not directories) below `directory`, as absolute paths below it.
    static func files(below directory: String) -> Set<String> {
        let all = FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []
        return Set(all.filter { name in
            var isDirectory: ObjCBool = false
            return !FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory) || !isDirectory.boolValue
        }.map { "/" + $0 })
    }
}
