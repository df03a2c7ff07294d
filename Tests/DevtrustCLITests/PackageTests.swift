import DevtrustEncoding
import DevtrustSignIn
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

    /// dpkg, debhelper and chroot need root, and the package is built from the release binary
    /// (`make build`). Off CI they are skipped without them; on CI all of it must be there, and a
    /// missing or stale release binary fails every test here instead of skipping it (Built.get).
    static let shouldRun = ExternalTool.isCI || (getuid() == 0 && DevtrustBinary.isNewerThanTheSources(release)
        && ["/usr/bin/dpkg-buildpackage", "/usr/bin/dh", "/usr/bin/lintian", "/usr/sbin/chroot"].allSatisfy(FileManager.default.isExecutableFile(atPath:)))
    static let skipped: Comment = "needs root, dpkg-buildpackage, lintian and a release binary newer than the sources (make build)"

    /// make, with a keystore, cache and configuration of its own for the binary it runs
    /// (`devtrust --version`, `devtrust completion`): as root, the defaults are the machine's.
    /// No HOME, as before: only devtrust's own variables are added.
    static func make(_ arguments: [String]) throws -> ProcessResult {
        let own = TemporaryDirectory("make")
        let variables = OwnDirectories.variables(in: own.path).filter { $0.key != "HOME" }
        return try ProcessRunner.run("/usr/bin/make", ["-C", Repository.path(""), "--no-print-directory"] + arguments,
                                     environment: variables.merging(["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"]) { $1 })
    }

    /// The package, built once for the suite by `make deb`, its prerequisites (`make build`,
    /// the packages) taken as done (-o): `make test` has just made them.
    struct Built: Sendable {
        let directory: TemporaryDirectory
        let path: String
        let version: String
        let buildOutput: ProcessResult

        static let shared: Result<Built, any Error> = Result {
            let scratch = TemporaryDirectory("version")
            let version = try DevtrustBinary(keystore: scratch.file("ks"), path: release).run("--version").stdout
                .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "devtrust ", with: "")
            let directory = TemporaryDirectory("deb")
            let result = try PackageTests.make(["-o", "build", "-o", "deps-deb", "deb", "DEB_DIR=" + directory.file("out")])
            let path = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
            return Built(directory: directory, path: path, version: version, buildOutput: result)
        }

        static func get() throws -> Built {
            try #require(DevtrustBinary.isNewerThanTheSources(release),
                         "\(release) is missing or older than the sources (Sources/, Package.swift, the Makefile): run make build (make test does)")
            let built = try shared.get()
            try #require(built.buildOutput.status == 0, "\(built.buildOutput)")
            return built
        }

        func field(_ name: String) throws -> String {
            try ProcessRunner.run("/usr/bin/dpkg-deb", ["--field", path, name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// The package's files (not its directories), as absolute paths.
        func files() throws -> Set<String> { try listing(directories: false) }

        func directories() throws -> Set<String> { try listing(directories: true) }

        private func listing(directories: Bool) throws -> Set<String> {
            let listing = try ProcessRunner.run("/usr/bin/dpkg-deb", ["--contents", path])
            #expect(listing.status == 0, "\(listing)")
            return Set(listing.stdout.split(separator: "\n").filter { $0.hasPrefix("d") == directories }.compactMap { line in
                line.split(separator: " ", omittingEmptySubsequences: true).last.map { String($0.dropFirst()) }
            }.map { $0.count > 1 && $0.hasSuffix("/") ? String($0.dropLast()) : $0 })
        }

        /// A control member's text (DEBIAN/NAME), "" when the package has none.
        func control(_ name: String) throws -> String {
            let scratch = TemporaryDirectory("control")
            let unpacked = try ProcessRunner.run("/usr/bin/dpkg-deb", ["--control", path, scratch.path])
            #expect(unpacked.status == 0, "\(unpacked)")
            return (try? String(contentsOfFile: scratch.file(name), encoding: .utf8)) ?? ""
        }

        func conffiles() throws -> [String] { try control("conffiles").split(separator: "\n").map(String.init) }

        /// A copy with another version, for an upgrade.
        func repacked(version newVersion: String, into directory: TemporaryDirectory) throws -> String {
            let tree = directory.file("tree")
            #expect(try ProcessRunner.run("/usr/bin/dpkg-deb", ["--raw-extract", path, tree]).status == 0)
            let control = tree + "/DEBIAN/control"
            let text = try String(contentsOfFile: control, encoding: .utf8)
            try text.replacingOccurrences(of: "\nVersion: \(version)\n", with: "\nVersion: \(newVersion)\n").write(toFile: control, atomically: true, encoding: .utf8)
            let output = directory.file("devtrust_\(newVersion).deb")
            let built = try ProcessRunner.run("/usr/bin/dpkg-deb", ["--root-owner-group", "--build", tree, output])
            #expect(built.status == 0, "\(built)")
            return output
        }
    }

    static func packages(_ field: String) -> Set<String> {
        Set(field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? "" })
    }

    /// The groups a unit file names in `SupplementaryGroups=` (space-separated, over any lines).
    static func supplementaryGroups(ofUnit path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            .filter { $0.hasPrefix("SupplementaryGroups=") }
            .flatMap { $0.dropFirst("SupplementaryGroups=".count).split(separator: " ").map(String.init) }
    }

    /// The Debian package that holds a library, found by its soname in the system's dpkg database.
    static func owner(ofLibrary soname: String) throws -> String {
        let found = try ProcessRunner.run("/usr/bin/dpkg-query", ["--search", "*/" + soname])
        try #require(found.status == 0, "no installed package holds \(soname): \(found)")
        return String(found.stdout.prefix { $0 != ":" })
    }

    // MARK: - The package

    @Test(.enabled(if: shouldRun, skipped))
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
                         "/etc/devtrust/config.json.example",
                         "/usr/share/doc/devtrust/copyright", "/usr/share/doc/devtrust/changelog.gz", "/usr/share/doc/devtrust/README.md.gz"] {
            #expect(files.contains(expected), "\(expected) is not in the package: \(files.sorted())")
        }
        // The host manifests are postinst's (browser install --system), not files dpkg would
        // ask about or replace: only the browsers' directories above them are the package's.
        #expect(!files.contains { $0.hasSuffix("/dev.devtrust.host.json") }, "\(files.sorted())")
        #expect(try built.directories().isSuperset(of: ["/etc/chromium", "/usr/lib/mozilla"]))
        #expect(try built.conffiles() == ["/etc/devtrust/config.json.example"])
        // Every file of the extension's directory, whatever it holds now.
        let extensionFiles = try FileManager.default.contentsOfDirectory(atPath: Repository.path("browser"))
        #expect(Set(extensionFiles.map { "/usr/share/devtrust/browser/" + $0 }).isSubset(of: files))
    }

    /// Depends: the package of every library the binary links (libc; libcrypto when it is
    /// dynamic), and nothing else: the group the agent's unit runs in is the package's own
    /// (theAgentsGroupIsMadeBySystemdSysusersFromThePackagesFile), not tpm-udev's (which
    /// would pull in udev) nor debhelper's `systemd | systemd-sysusers` (which apt would meet with
    /// systemd in a container). Recommends: the package of every library devtrust dlopens, by the
    /// soname in its C shims, and the default TCTI's; nothing else.
    @Test(.enabled(if: shouldRun, skipped))
    func theDependenciesAreTheLibrariesTheBinaryLinksAndLoads() throws {
        let built = try Built.get()
        let objdump = try ProcessRunner.run("/usr/bin/objdump", ["-p", Self.release])
        let needed = objdump.stdout.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            return words.count == 2 && words[0] == "NEEDED" ? String(words[1]) : nil
        }
        #expect(needed.contains("libc.so.6"), "\(objdump)")
        // Exactly those: nothing the binary can do without (libssl3 with a static libcrypto) is forced on a machine.
        let depends = Self.packages(try built.field("Depends"))
        #expect(depends == Set(try needed.map(Self.owner(ofLibrary:))), "\(needed) -> \(depends)")

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
        // The default TCTI's fallback (tabrmd) and what doctor suggests for it; the tools; a software TPM.
        #expect(Self.packages(try built.field("Suggests")) == ["libtss2-tcti-swtpm0", "libtss2-tcti-tabrmd0", "swtpm", "swtpm-tools", "tpm2-abrmd", "tpm2-tools"])
    }

    /// systemd-sysusers, where the host has it (systemd ships it).
    static let sysusers = ["/usr/bin/systemd-sysusers", "/bin/systemd-sysusers"].first(where: FileManager.default.isExecutableFile(atPath:))

    /// The groups a sysusers.d file makes (its `g` lines).
    static func groups(inSysusers text: String) -> Set<String> {
        Set(text.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(whereSeparator: \.isWhitespace)
            return fields.count >= 2 && fields[0] == "g" ? String(fields[1]) : nil
        })
    }

    /// The lines of an /etc/group (NAME:x:GID:MEMBERS), by name.
    static func groupEntries(_ path: String) -> [String: [Substring]] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var entries = [String: [Substring]]()
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            if fields.count == 4 { entries[String(fields[0])] = fields }
        }
        return entries
    }

    /// Every group of the agent's unit (SupplementaryGroups=) is made by the package's
    /// /usr/lib/sysusers.d/devtrust.conf, which postinst hands to systemd-sysusers (on configure,
    /// and when systemd-sysusers comes later: the file trigger), where it is installed. The file,
    /// given to the host's systemd-sysusers for an empty root, makes each as a system group, once;
    /// a group that is there already (tpm-udev's addgroup made it) stays as it was.
    @Test(.enabled(if: shouldRun && (ExternalTool.isCI || sysusers != nil), skipped))
    func theAgentsGroupIsMadeBySystemdSysusersFromThePackagesFile() throws {
        let built = try Built.get()
        let groups = try Self.supplementaryGroups(ofUnit: Repository.path("debian/devtrust.service"))
        #expect(groups == ["tss"])
        let conf = "/usr/lib/sysusers.d/devtrust.conf"
        let files = try built.files()
        #expect(files.contains(conf), "\(files.sorted())")
        let tree = TemporaryDirectory("contents")
        #expect(try ProcessRunner.run("/usr/bin/dpkg-deb", ["--extract", built.path, tree.path]).status == 0)
        let text = try String(contentsOfFile: tree.file(String(conf.dropFirst())), encoding: .utf8)
        #expect(Set(groups).isSubset(of: Self.groups(inSysusers: text)), "\(groups): \(text)")
        let postinst = try built.control("postinst")
        #expect(postinst.contains("command -v systemd-sysusers >/dev/null; then\n        systemd-sysusers ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} devtrust.conf\n"),
                "\(postinst)")
        #expect(postinst.contains("if [ \"$1\" = configure ] || [ \"$1\" = triggered ]; then\n    if command -v systemd-sysusers"), "\(postinst)")
        let triggers = try built.control("triggers").split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(triggers == ["interest-noawait /bin/systemd-sysusers", "interest-noawait /usr/bin/systemd-sysusers"], "\(triggers)")

        let sysusers = try #require(Self.sysusers, "systemd-sysusers is not installed")
        let empty = TemporaryDirectory("sysusers-root")
        try FileManager.default.createDirectory(atPath: empty.file("etc"), withIntermediateDirectories: true)
        for file in ["etc/group", "etc/passwd"] { _ = FileManager.default.createFile(atPath: empty.file(file), contents: nil) }
        let made = try ProcessRunner.run(sysusers, ["--root=\(empty.path)", tree.file(String(conf.dropFirst()))])
        #expect(made.status == 0, "\(made)")
        let entries = Self.groupEntries(empty.file("etc/group"))
        #expect(Set(entries.keys) == Set(groups), "\(entries)")
        for group in groups {
            // A system group: a GID below 1000 (Debian's SYS_GID_MAX is 999).
            let gid = entries[group].flatMap { Int($0[2]) }
            #expect(gid.map { $0 > 0 && $0 < 1000 } == true, "\(group): \(String(describing: entries[group]))")
        }
        let first = FileManager.default.contents(atPath: empty.file("etc/group"))
        let again = try ProcessRunner.run(sysusers, ["--root=\(empty.path)", tree.file(String(conf.dropFirst()))])
        #expect(again.status == 0 && FileManager.default.contents(atPath: empty.file("etc/group")) == first, "\(again)")

        // tss made first by tpm-udev's addgroup (here GID 109): kept, not a second tss.
        let existing = TemporaryDirectory("sysusers-existing")
        try FileManager.default.createDirectory(atPath: existing.file("etc"), withIntermediateDirectories: true)
        let before = "root:x:0:\n" + groups.map { "\($0):x:109:alice" }.joined(separator: "\n") + "\n"
        _ = FileManager.default.createFile(atPath: existing.file("etc/group"), contents: Data(before.utf8))
        _ = FileManager.default.createFile(atPath: existing.file("etc/passwd"), contents: Data("root:x:0:0:root:/root:/bin/sh\n".utf8))
        let kept = try ProcessRunner.run(sysusers, ["--root=\(existing.path)", tree.file(String(conf.dropFirst()))])
        #expect(try kept.status == 0 && String(contentsOfFile: existing.file("etc/group"), encoding: .utf8) == before, "\(kept)")
    }

    /// Installed with dpkg, postinst makes the group below the root (the host's systemd-sysusers
    /// with --root). Without systemd-sysusers (a container without systemd) the package installs
    /// and makes no group; a package that brings systemd-sysusers later, at either path systemd
    /// ships it at (/bin on Debian 12, /usr/bin later), triggers postinst, which makes it then.
    @Test(.enabled(if: shouldRun && (ExternalTool.isCI || sysusers != nil), skipped))
    func installingMakesTheGroupAndSoDoesSystemdSysusersComingLater() throws {
        let built = try Built.get()
        let groups = try Self.supplementaryGroups(ofUnit: Repository.path("debian/devtrust.service"))
        let root = try ScratchRoot()
        let install = try root.dpkg(["--install", built.path])
        #expect(try install.status == 0 && root.status() == "ii ", "\(install)")
        #expect(Set(Self.groupEntries(root.directory.file("etc/group")).keys) == Set(groups), "\(install)")

        // PATH: the host's commands but systemd-sysusers.
        let commands = TemporaryDirectory("path")
        for directory in ["/usr/sbin", "/usr/bin"] {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name != "systemd-sysusers" {
                if !FileManager.default.fileExists(atPath: commands.file(name)) {
                    try FileManager.default.createSymbolicLink(atPath: commands.file(name), withDestinationPath: directory + "/" + name)
                }
            }
        }
        // dpkg runs a package's triggers only once its dependencies are met (else "triggers looping"):
        // the root's database gets them as the host has them, without their files (the host's are used).
        let scratch = TemporaryDirectory("stubs")
        var dependencies = [String]()
        for package in Self.packages(try built.field("Depends")) {
            let fields = try ProcessRunner.run("/usr/bin/dpkg-query", ["--show", "--showformat=${Version} ${Architecture} ${Multi-Arch}", package])
            try #require(fields.status == 0, "\(fields)")
            let words = fields.stdout.split(separator: " ").map(String.init)
            dependencies.append(try Self.stubPackage(package, version: words[0], architecture: words[1], multiArch: words.count > 2 ? words[2] : "", in: scratch))
        }
        for path in ["bin/systemd-sysusers", "usr/bin/systemd-sysusers"] {
            let bare = try ScratchRoot()
            for dependency in dependencies { #expect(try bare.dpkg(["--install", dependency]).status == 0) }
            let without = try bare.dpkg(["--install", built.path], path: commands.path)
            #expect(try without.status == 0 && bare.status() == "ii ", "\(without)")
            #expect(!FileManager.default.fileExists(atPath: bare.directory.file("etc/group")), "\(without)")

            // A package of systemd-sysusers' own path (what postinst runs is the host's: scripts run chrootless).
            let own = TemporaryDirectory("stub")
            let later = try bare.dpkg(["--install", try Self.stubPackage("devtrust-test-sysusers", file: path, in: own)])
            #expect(try later.status == 0 && later.stdout.contains("Processing triggers for devtrust ") && bare.status() == "ii ", "\(later)")
            #expect(Set(Self.groupEntries(bare.directory.file("etc/group")).keys) == Set(groups), "\(path): \(later)")
            withExtendedLifetime(own) {}
        }
        withExtendedLifetime((scratch, commands)) {}
    }

    /// A package of no use but its name and one file (empty when given), built in `directory`.
    static func stubPackage(_ name: String, version: String = "1", architecture: String = "all", multiArch: String = "",
                            file: String? = nil, in directory: TemporaryDirectory) throws -> String {
        let tree = directory.file(name + "-tree")
        try FileManager.default.createDirectory(atPath: tree + "/DEBIAN", withIntermediateDirectories: true)
        let control = "Package: \(name)\nVersion: \(version)\nArchitecture: \(architecture)\n" + (multiArch.isEmpty || multiArch == "no" ? "" : "Multi-Arch: \(multiArch)\n")
            + "Maintainer: devtrust tests <tests@example.com>\nDescription: a stand-in for the package tests\n"
        try control.write(toFile: tree + "/DEBIAN/control", atomically: true, encoding: .utf8)
        if let file {
            try FileManager.default.createDirectory(atPath: URL(fileURLWithPath: tree + "/" + file).deletingLastPathComponent().path, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: tree + "/" + file, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o755])
        }
        let output = directory.file(name + ".deb")
        let packed = try ProcessRunner.run("/usr/bin/dpkg-deb", ["--root-owner-group", "--build", tree, output])
        #expect(packed.status == 0, "\(packed)")
        return output
    }

    /// debian/copyright, as the package installs it, is machine-readable (DEP-5), read by
    /// python3-debian's strict parser.
    @Test(.enabled(if: shouldRun && (ExternalTool.isCI || FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/debian/copyright.py"))))
    func theCopyrightFileIsMachineReadable() throws {
        let built = try Built.get()
        let tree = TemporaryDirectory("contents")
        #expect(try ProcessRunner.run("/usr/bin/dpkg-deb", ["--extract", built.path, tree.path]).status == 0)
        let checked = try ProcessRunner.run("/usr/bin/python3", [Repository.path("Tests/Interop/check_copyright.py"), tree.file("usr/share/doc/devtrust/copyright")],
                                            environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"])
        #expect(checked.status == 0 && checked.stdout == "ok devtrust\n", "\(checked)")
        // Each lintian override names its tag's exact context: a wildcard would hide what comes later.
        let overrides = try String(contentsOfFile: tree.file("usr/share/lintian/overrides/devtrust"), encoding: .utf8)
        #expect(!overrides.contains("*"), "\(overrides)")
    }

    // MARK: - Installed with dpkg

    /// A directory that dpkg installs into (`--root`), which commands see as `/` in a
    /// chroot: the host's libraries are bound read-only into it in a mount namespace of
    /// the command's own, so nothing of them is in the root's listing and no mount
    /// outlives the command.
    struct ScratchRoot {
        let directory = TemporaryDirectory("root")
        var path: String { directory.path }
        /// Whether the host's library directories are bound into the root (else the root holds
        /// copies of the libraries the binary links, and nothing that devtrust loads with dlopen).
        let hostLibraries: Bool
        static let user: uid_t = 4242
        static let multiarch = (try? ProcessRunner.run("/usr/bin/dpkg-architecture", ["-qDEB_HOST_MULTIARCH"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? ""

        init(hostLibraries: Bool = true) throws {
            self.hostLibraries = hostLibraries
            let manager = FileManager.default
            // var/lib/systemd: systemd's state, there on a machine with systemd (deb-systemd-helper keeps its
            // record of the agent's socket there, and leaves the directory when the package is purged).
            for directory in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/cache", "var/lib/systemd", "usr/lib/\(Self.multiarch)", "usr/lib64", "proc",
                              "dev", "tmp", "home/alice"] {
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
            if !hostLibraries {
                // ldd's list for the release binary: libc, libm and the loader, copied to the same paths.
                let ldd = try ProcessRunner.run("/usr/bin/ldd", [PackageTests.release])
                #expect(ldd.status == 0, "\(ldd)")
                for line in ldd.stdout.split(separator: "\n") {
                    guard let library = line.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("/") }).map(String.init) else { continue }
                    let resolved = URL(fileURLWithPath: library).resolvingSymlinksInPath().path
                    let target = self.directory.file(String(library.dropFirst()))
                    if !manager.fileExists(atPath: target) { try manager.copyItem(atPath: resolved, toPath: target) }
                }
            }
        }

        /// dpkg on the root. The package's maintainer scripts run from the host with DPKG_ROOT
        /// set (--force-script-chrootless), with the host's commands (`path`, their PATH): the
        /// scratch root has no shell to run them chrooted. libc6 and the rest are the host's, not
        /// in the root's database (--force-depends).
        func dpkg(_ arguments: [String], path commands: String = "/usr/sbin:/usr/bin:/sbin:/bin") throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/dpkg", ["--root=\(path)", "--force-script-chrootless", "--force-depends"] + arguments,
                                  environment: ["PATH": commands, "LANG": "C.UTF-8"])
        }

        /// `dpkg --verify`: nothing of the package's changed or missing (exit 0, nothing printed).
        func expectVerified(_ when: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let verified = try dpkg(["--verify", "devtrust"])
            #expect(verified.status == 0 && verified.stdout.isEmpty, "\(when): \(verified)", sourceLocation: sourceLocation)
        }

        /// dpkg's status of the package: "ii " installed and configured.
        func status() throws -> String {
            try ProcessRunner.run("/usr/bin/dpkg-query", ["--root=\(path)", "--show", "--showformat=${db:Status-Abbrev}", "devtrust"]).stdout
        }

        /// A host manifest below the root, parsed ("etc/chromium" or "usr/lib/mozilla").
        func manifest(_ browserDirectory: String) throws -> JSONObject? {
            guard let bytes = FileManager.default.contents(atPath: directory.file(browserDirectory + "/native-messaging-hosts/dev.devtrust.host.json")) else { return nil }
            return try JSONParser.parse(Array(bytes)).objectValue
        }

        /// A file below the root, root's, mode 0644, in directories made 0755.
        func write(_ name: String, _ text: String) throws {
            try FileManager.default.createDirectory(atPath: URL(fileURLWithPath: directory.file(name)).deletingLastPathComponent().path,
                                                    withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            _ = FileManager.default.createFile(atPath: directory.file(name), contents: Data(text.utf8), attributes: [.posixPermissions: 0o644])
        }

        /// A command run chrooted in the root, as root or as alice (uid 4242, HOME /home/alice).
        func run(asAlice: Bool = false, _ arguments: [String]) throws -> ProcessResult {
            let script = """
                set -e
                root=$1; shift
                for library in \(hostLibraries ? "/usr/lib/\(Self.multiarch) /usr/lib64" : ""); do
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

    @Test(.enabled(if: shouldRun && ExternalTool.python.shouldRun && ExternalTool.zsh.shouldRun && ExternalTool.fish.shouldRun, skipped))
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
        // postinst wrote the host manifests, naming /usr/bin/devtrust: they are what the installed binary writes.
        for browserDirectory in ["etc/chromium", "usr/lib/mozilla"] {
            #expect(try root.manifest(browserDirectory)?["path"] == .string("/usr/bin/devtrust"), "\(browserDirectory)")
        }
        #expect(try root.status() == "ii ")
        try root.expectVerified("installed")
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
        // And the agent's group, which postinst made with systemd-sysusers (where the host has it): a
        // system group stays when its package goes, as Debian's do (a GID given again to another group
        // would own what the first one left).
        let accounts: Set<String> = ["etc", "etc/group", "etc/gshadow", "etc/.pwd.lock"]
        let groups = try Self.supplementaryGroups(ofUnit: Repository.path("debian/devtrust.service"))
        var left = root.listing().filter { path in !userData.contains { path == $0 || path.hasPrefix($0 + "/") } }
        if Self.sysusers != nil {
            #expect(left.intersection(accounts) == accounts && before.isDisjoint(with: accounts), "\(left.sorted())")
            #expect(Set(Self.groupEntries(root.directory.file("etc/group")).keys) == Set(groups))
        }
        left.subtract(accounts)
        #expect(left == before, "left behind: \(left.subtracting(before).sorted()); removed: \(before.subtracting(left).sorted())")
        let records = try FileManager.default.contentsOfDirectory(atPath: root.directory.file("var/lib/dpkg/info"))
        #expect(!records.contains { $0.hasPrefix("devtrust.") }, "\(records)")

        // `browser uninstall --system` removes the package's manifests; dpkg still removes the rest cleanly.
        let again = try root.dpkg(["--install", built.path])
        #expect(again.status == 0, "\(again)")
        let uninstalled = try root.run(["/usr/bin/devtrust", "browser", "uninstall", "--system"])
        #expect(uninstalled.status == 0 && uninstalled.stderr.components(separatedBy: "removed: ").count == 3, "\(uninstalled)")
        try root.expectVerified("after browser uninstall --system")
        let secondPurge = try root.dpkg(["--purge", "devtrust"])
        #expect(secondPurge.status == 0, "\(secondPurge)")
        let leftAgain = root.listing().filter { path in !userData.contains { path == $0 || path.hasPrefix($0 + "/") } }.subtracting(accounts)
        #expect(leftAgain == before, "left behind: \(leftAgain.subtracting(before).sorted())")
        #expect(keystores.map { root.contents(below: $0) } == kept)
    }

    /// A machine that ran `make install` and `browser install --system` (manifests naming
    /// /usr/local/bin/devtrust, which `make uninstall` leaves) with an administrator's
    /// configuration listing the organisation's extensions: dpkg installs over the manifests
    /// without asking (standard input is /dev/null, as for unattended upgrades), an upgrade
    /// keeps the configuration's extensions in them, dpkg --verify stays clean, and purging
    /// removes the manifests and root's posture cache but nothing the administrator put there.
    /// The system agent's units: in the package, not enabled by installing it (an administrator
    /// opts in), valid as systemd reads them (`systemd-analyze verify`, against the installed root:
    /// its binary, the host's own units for the targets they name), listening where clients look
    /// and serving the machine keystore, and hardened (`systemd-analyze security`'s exposure).
    @Test(.enabled(if: shouldRun && FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), skipped))
    func theAgentsUnitsAreInstalledDisabledAndSystemdTakesThem() throws {
        let built = try Built.get()
        let files = try built.files()
        #expect(files.isSuperset(of: ["/usr/lib/systemd/system/devtrust.socket", "/usr/lib/systemd/system/devtrust.service"]), "\(files.sorted())")
        let root = try ScratchRoot()
        let installed = try root.dpkg(["--install", built.path])
        #expect(installed.status == 0, "\(installed)")
        #expect(try root.status() == "ii ")
        // Not enabled: no link in any .wants directory, nothing in /etc/systemd at all.
        #expect(!FileManager.default.fileExists(atPath: root.directory.file("etc/systemd")), "\(Self.files(below: root.directory.file("etc")).sorted())")

        // The host's units (sockets.target, sysinit.target...) where systemd looks below the root too.
        try FileManager.default.createDirectory(atPath: root.directory.file("usr/local/lib/systemd"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "/lib/systemd/system", toPath: root.directory.file("usr/local/lib/systemd/system"))
        let verified = try ProcessRunner.run("/usr/bin/systemd-analyze", ["verify", "--man=no", "--root=\(root.path)", "devtrust.socket", "devtrust.service"])
        #expect(verified.status == 0 && verified.stdout.isEmpty && verified.stderr.isEmpty, "\(verified)")

        let socket = try String(contentsOfFile: root.directory.file("usr/lib/systemd/system/devtrust.socket"), encoding: .utf8)
        let service = try String(contentsOfFile: root.directory.file("usr/lib/systemd/system/devtrust.service"), encoding: .utf8)
        #expect(socket.contains("\nListenStream=/run/devtrust/agent.sock\n") && socket.contains("\nWantedBy=sockets.target\n"))
        #expect(service.contains("\nExecStart=/usr/bin/devtrust --keystore /var/lib/devtrust agent\n"))
        let security = try ProcessRunner.run("/usr/bin/systemd-analyze", ["security", "--offline=true", "--no-pager",
                                                                          root.directory.file("usr/lib/systemd/system/devtrust.service")])
        let level = security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level for devtrust.service:") }
        let exposure = level.flatMap { $0.split(separator: ":").last?.split(separator: " ").first }.flatMap { Double($0) }
        // docs/deployment.md gives it: 2.7 ("OK") when written; 10 is a unit with no hardening.
        #expect(exposure.map { $0 <= 3.0 } == true, "\(security)")
    }

    @Test(.enabled(if: shouldRun, skipped))
    func installingOverOldManifestsAndUpgradingKeepTheAdministratorsExtensions() throws {
        let built = try Built.get()
        let root = try ScratchRoot()
        let chromiumID = "abcdefghijklmnopabcdefghijklmnop"
        let config = #"{"browser": {"extensionIds": ["\#(chromiumID)", "org@example.com"]}}"# + "\n"
        try root.write("etc/devtrust/config.json", config)
        // What the administrator keeps in /var/cache/devtrust (here, root's keystore: DEVTRUST_KEYSTORE),
        // private as devtrust makes its directories (else devtrust would not use it as its cache).
        try root.write("var/cache/devtrust/keystore.json", "{}\n")
        chmod(root.directory.file("var/cache/devtrust"), 0o700)
        chmod(root.directory.file("var/cache/devtrust/keystore.json"), 0o600)
        // make install's binary writes its manifests, as README's steps do.
        try FileManager.default.createDirectory(atPath: root.directory.file("usr/local/bin"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.release, toPath: root.directory.file("usr/local/bin/devtrust"))
        let old = try root.run(["/usr/local/bin/devtrust", "browser", "install", "--system"])
        #expect(old.status == 0, "\(old)")
        #expect(try root.manifest("etc/chromium")?["path"] == .string("/usr/local/bin/devtrust"))
        try FileManager.default.removeItem(atPath: root.directory.file("usr/local/bin/devtrust"))

        func expectManifests(_ when: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let chromium = try root.manifest("etc/chromium"), firefox = try root.manifest("usr/lib/mozilla")
            #expect(chromium?["path"] == .string("/usr/bin/devtrust") && firefox?["path"] == .string("/usr/bin/devtrust"), "\(when)", sourceLocation: sourceLocation)
            #expect(chromium?["allowed_origins"] == .array([.string("chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf/"), .string("chrome-extension://\(chromiumID)/")]),
                    "\(when): \(String(describing: chromium))", sourceLocation: sourceLocation)
            #expect(firefox?["allowed_extensions"] == .array([.string("host@devtrust.dev"), .string("org@example.com")]),
                    "\(when): \(String(describing: firefox))", sourceLocation: sourceLocation)
        }
        let install = try root.dpkg(["--install", built.path])
        #expect(install.status == 0 && !install.stdout.contains("conffile"), "\(install)")
        #expect(try root.status() == "ii ")
        try expectManifests("installed over make install's")
        try root.expectVerified("installed")

        // root's posture cache beside the administrator's file.
        #expect(try root.run(["/usr/bin/devtrust", "init", "--backend", "software", "-q"]).status == 0)
        #expect(try root.run(["/usr/bin/devtrust", "token", "--device-id", "package-test"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: root.directory.file("var/cache/devtrust/posture.json")))
        // And the DPoP nonces a DPoP sign-in of root's would leave there (the name devtrust writes).
        try root.write("var/cache/devtrust/" + DPoPNonceFile.fileName, "{}\n")

        let scratch = TemporaryDirectory("upgrade")
        let upgrade = try root.dpkg(["--install", try built.repacked(version: built.version + "+1", into: scratch)])
        #expect(upgrade.status == 0, "\(upgrade)")
        #expect(try root.status() == "ii " && (try root.run(["/usr/bin/devtrust", "--version"])).status == 0)
        try expectManifests("upgraded")
        try root.expectVerified("upgraded")

        let purge = try root.dpkg(["--purge", "devtrust"])
        #expect(purge.status == 0, "\(purge)")
        for browserDirectory in ["etc/chromium", "usr/lib/mozilla"] {
            #expect(!FileManager.default.fileExists(atPath: root.directory.file(browserDirectory)), "\(browserDirectory) is left")
        }
        #expect(FileManager.default.contents(atPath: root.directory.file("etc/devtrust/config.json")) == Data(config.utf8))
        #expect(FileManager.default.contents(atPath: root.directory.file("var/cache/devtrust/keystore.json")) == Data("{}\n".utf8))
        #expect(root.contents(below: "var/cache/devtrust").keys.sorted() == ["keystore.json"])
    }

    /// A configuration that devtrust refuses (here, an extension ID that is no string) stops
    /// the manifests, not the package: postinst says what failed and what to run once it is
    /// fixed, dpkg configures the package, and removing it still works.
    @Test(.enabled(if: shouldRun, skipped))
    func aConfigurationThatIsRefusedWarnsAndThePackageIsStillConfigured() throws {
        let built = try Built.get()
        let root = try ScratchRoot()
        try root.write("etc/devtrust/config.json", #"{"browser": {"extensionIds": [42]}}"# + "\n")
        let install = try root.dpkg(["--install", built.path])
        #expect(install.status == 0, "\(install)")
        #expect(install.stderr.contains("devtrust: the browsers' host manifests were not written: devtrust: error: ")
                && install.stderr.contains("/etc/devtrust/config.json")
                && install.stderr.contains("then run: sudo devtrust browser install --system"), "\(install)")
        #expect(try root.status() == "ii ")
        #expect(try root.manifest("etc/chromium") == nil && (try root.manifest("usr/lib/mozilla")) == nil)
        let remove = try root.dpkg(["--remove", "devtrust"])
        #expect(remove.status == 0 && !remove.stderr.contains("devtrust: the browsers' host manifests"), "\(remove)")
    }

    /// With --no-install-recommends: only what the binary links is on the machine (a root holding
    /// libc, libm and the loader, no host libraries bound in). Software keys and tokens work; a TPM
    /// key, a sign-in and doctor name the packages to install.
    @Test(.enabled(if: shouldRun, skipped))
    func withoutTheRecommendedPackagesEachCommandSaysWhatToInstall() throws {
        let built = try Built.get()
        let root = try ScratchRoot(hostLibraries: false)
        let install = try root.dpkg(["--install", built.path])
        #expect(install.status == 0, "\(install)")
        #expect(!FileManager.default.fileExists(atPath: root.directory.file("usr/lib/\(ScratchRoot.multiarch)/libcurl.so.4")))

        let tpm = try root.run(["/usr/bin/devtrust", "init", "--backend", "tpm"])
        #expect(tpm.status == 6, "\(tpm)")
        #expect(tpm.stderr.contains("the TPM software stack (tpm2-tss) cannot be loaded (") && tpm.stderr.contains("libtss2-esys.so.0"), "\(tpm)")
        #expect(tpm.stderr.contains("install the packages libtss2-esys-3.0.2-0, libtss2-tctildr0, libtss2-mu0 and libtss2-rc0"), "\(tpm)")

        let software = try root.run(["/usr/bin/devtrust", "init", "--backend", "software", "-q"])
        let token = try root.run(["/usr/bin/devtrust", "token", "--device-id", "x"])
        #expect(software.status == 0 && token.status == 0 && token.stdout.split(separator: ".").count == 3, "\(software)\n\(token)")

        let login = try root.run(["/usr/bin/devtrust", "login", "--device-code", "--server", "https://127.0.0.1:9", "--client-id", "c"])
        #expect(login.status == 5, "\(login)")
        #expect(login.stderr.contains("cannot load libcurl (") && login.stderr.contains("install it: apt-get install libcurl4"), "\(login)")

        // Warnings, not failures, with a software key: each names its package.
        let doctor = try root.run(["/usr/bin/devtrust", "--json", "doctor"])
        #expect(doctor.status == 0, "\(doctor)")
        let checks = try #require(try JSONParser.parse(doctor.stdout).objectValue?["checks"]?.arrayValue, "\(doctor)")
        var fixes = [String: String]()
        for check in checks {
            guard let object = check.objectValue, let id = object["id"]?.stringValue else { continue }
            if object["verdict"] == .string("warn") { fixes[id] = object["fix"]?.stringValue ?? "" }
        }
        #expect(fixes == ["library.tss2-esys": "sudo apt-get install libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-mu0 libtss2-rc0",
                          "library.tcti": "sudo apt-get install libtss2-tcti-device0", "library.libcurl": "sudo apt-get install libcurl4",
                          "library.libqrencode": "sudo apt-get install libqrencode4"], "\(doctor)")
    }

    // MARK: - make install

    /// `make install`'s files are the package's, save what only the package has (the Debian
    /// changelog; lintian's overrides) and the compression dh_compress adds, each with the
    /// package's mode; below another PREFIX than /usr, zsh's go to site-functions and the example
    /// configuration to the docs' examples (never /etc/devtrust, where the package's is).
    /// `make uninstall` removes every one, the manifests that name its binary (not the package's),
    /// and the directories it made but the FHS's own; an administrator's /etc/devtrust/config.json
    /// stays, and nothing fails on the way.
    @Test(.enabled(if: shouldRun, skipped))
    func makeInstallInstallsThePackagesFilesAndUninstallRemovesThem() throws {
        let built = try Built.get()
        // The system agent's units name /usr/bin/devtrust: the package's alone (docs/deployment.md says how to
        // use them with another PREFIX).
        let packageOnly: Set<String> = ["/usr/share/doc/devtrust/changelog.gz", "/usr/share/lintian/overrides/devtrust",
                                        "/usr/lib/systemd/system/devtrust.service", "/usr/lib/systemd/system/devtrust.socket",
                                        "/usr/lib/sysusers.d/devtrust.conf"]
        let packaged = Set(try built.files().subtracting(packageOnly).map { path in
            path.hasSuffix("/devtrust.1.gz") || path.hasSuffix("/README.md.gz") ? String(path.dropLast(3)) : path
        })
        let config = #"{"claims": {"site": "admin's"}}"# + "\n"
        for prefix in ["/usr", "/usr/local"] {
            let destination = TemporaryDirectory("install")
            let own = TemporaryDirectory("install-own")
            let variables = ["PREFIX=\(prefix)", "DESTDIR=\(destination.path)", "INSTALL_BINARY=\(Self.release)"]
            // make install, its release build (make build) taken as done.
            let install = try Self.make(["-o", "build", "install"] + variables)
            #expect(install.status == 0, "\(install)")
            let installed = Self.files(below: destination.path)
            let expected = Set(packaged.map { path in
                guard prefix != "/usr" else { return path }
                if path == "/etc/devtrust/config.json.example" { return prefix + "/share/doc/devtrust/examples/config.json.example" }
                return prefix + String(path.dropFirst(4)).replacingOccurrences(of: "/zsh/vendor-completions/", with: "/zsh/site-functions/")
            })
            #expect(installed == expected, "\(prefix): only installed: \(installed.subtracting(expected).sorted()); only packaged: \(expected.subtracting(installed).sorted())")
            for file in installed {
                var status = stat()
                lstat(destination.path + file, &status)
                let expectedMode: mode_t = file.hasSuffix("/bin/devtrust") ? 0o755 : 0o644
                #expect(status.st_mode & 0o7777 == expectedMode && status.st_uid == 0, "\(file): \(String(status.st_mode & 0o7777, radix: 8))")
            }
            for directory in Self.directories(below: destination.path) {
                var status = stat()
                lstat(destination.path + directory, &status)
                #expect(status.st_mode & 0o7777 == 0o755, "\(directory): \(String(status.st_mode & 0o7777, radix: 8))")
            }

            // What the machine has beside: an administrator's configuration, the host manifests
            // of this binary, and (for /usr/local) a package's manifests naming /usr/bin/devtrust.
            let configuration = destination.file("etc/devtrust/config.json")
            try FileManager.default.createDirectory(atPath: destination.file("etc/devtrust"), withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: configuration, contents: Data(config.utf8), attributes: [.posixPermissions: 0o644])
            let manifests = try ProcessRunner.run(Self.release, ["--config", configuration, "browser", "install", "--system", "--root", destination.path, "-q"],
                                                  environment: DevtrustBinary(keystore: own.file("ks"), path: Self.release).environment)
            #expect(manifests.status == 0, "\(manifests)")
            let chromium = destination.file("etc/chromium/native-messaging-hosts/dev.devtrust.host.json")
            let firefox = destination.file("usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json")
            for manifest in [chromium, firefox] {
                let text = try String(contentsOfFile: manifest, encoding: .utf8)
                try text.replacingOccurrences(of: #""path": "\#(URL(fileURLWithPath: Self.release).resolvingSymlinksInPath().path)""#,
                                              with: #""path": "\#(prefix == "/usr" ? "/usr/bin/devtrust" : "/usr/local/bin/devtrust")""#)
                    .write(toFile: manifest, atomically: true, encoding: .utf8)
            }
            let packageManifest = #"{"name": "dev.devtrust.host", "path": "/usr/bin/devtrust"}"#
            if prefix != "/usr" { _ = FileManager.default.createFile(atPath: firefox, contents: Data(packageManifest.utf8)) }

            let uninstall = try Self.make(["uninstall"] + variables)
            #expect(uninstall.status == 0 && !uninstall.stdout.contains("Error") && !uninstall.stderr.contains("Error") && uninstall.stderr.isEmpty, "\(uninstall)")
            #expect(Self.files(below: destination.path) == Set(["/etc/devtrust/config.json"]).union(prefix == "/usr" ? [] : ["/usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json"]),
                    "\(prefix): \(Self.files(below: destination.path).sorted())")
            #expect(FileManager.default.contents(atPath: configuration) == Data(config.utf8))
            #expect(!FileManager.default.fileExists(atPath: chromium) && uninstall.stdout.contains("removed \(chromium)"), "\(uninstall)")
            let left = Self.directories(below: destination.path).filter { !$0.hasPrefix("/etc") && !$0.hasPrefix("/usr/lib") }
            let standard = ["/bin", "/share", "/share/man", "/share/man/man1"].map { prefix + $0 }
            #expect(left == Set(standard + (prefix == "/usr" ? ["/usr"] : ["/usr", "/usr/local"])), "\(prefix): \(left.sorted())")
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

    static func directories(below directory: String) -> Set<String> {
        let all = FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []
        return Set(all.map { "/" + $0 }).subtracting(files(below: directory))
    }
}
