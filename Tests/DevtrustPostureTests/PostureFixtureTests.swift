@testable import DevtrustPosture
import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// A machine as a tree of files below a root prefix, as the collectors see it.
struct FixtureMachine: Sendable, CustomTestStringConvertible {
    let name: String
    var files: [String: [UInt8]] = [:]
    var directories: [String] = []

    var testDescription: String { name }

    init(_ name: String) { self.name = name }

    mutating func file(_ path: String, _ text: String) { files[path] = Array(text.utf8) }
    mutating func bytes(_ path: String, _ bytes: [UInt8]) { files[path] = bytes }
    mutating func directory(_ path: String) { directories.append(path) }

    /// A block device in sysfs: dm uuid/name, slaves, and for MAJ:MIN its uevent.
    mutating func block(_ name: String, majorMinor: String? = nil, dmUUID: String? = nil, dmName: String? = nil, slaves: [String] = []) {
        directory("/sys/class/block/\(name)")
        if let majorMinor { file("/sys/dev/block/\(majorMinor)/uevent", "MAJOR=\(majorMinor.split(separator: ":")[0])\nDEVNAME=\(name)\nDEVTYPE=disk\n") }
        if let dmUUID { file("/sys/class/block/\(name)/dm/uuid", dmUUID + "\n") }
        if let dmName { file("/sys/class/block/\(name)/dm/name", dmName + "\n") }
        for slave in slaves { file("/sys/class/block/\(name)/slaves/\(slave)", "") }
    }

    mutating func root(_ majorMinor: String, _ fileSystem: String, _ source: String, extra: String = "") {
        file("/proc/self/mountinfo", "22 27 0:21 / /proc rw,relatime - proc proc rw\n\(extra)29 1 \(majorMinor) / / rw,relatime shared:1 - \(fileSystem) \(source) rw\n")
    }

    mutating func osRelease(id: String, version: String) {
        file("/etc/os-release", "PRETTY_NAME=\"Test Linux\"\nNAME=\"Test\"\nID=\(id)\nVERSION_ID=\"\(version)\"\n")
        file("/proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    }

    mutating func secureBoot(_ value: UInt8, setupMode: UInt8 = 0) {
        bytes("/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", [0x06, 0, 0, 0, value])
        bytes("/sys/firmware/efi/efivars/SetupMode-8be4df61-93ca-11d2-aa0d-00e098032b8c", [0x06, 0, 0, 0, setupMode])
    }

    mutating func tpm(version: String?) {
        directory("/sys/class/tpm")
        if let version { file("/sys/class/tpm/tpm0/tpm_version_major", version + "\n") }
    }

    mutating func gnome(_ database: String?) {
        file("/usr/bin/gnome-shell", "")
        if let database {
            bytes("/home/alice/.config/dconf/user", Array(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/\(database).gvdb"))!))
        }
    }

    func materialize() -> TemporaryDirectory {
        let tree = TemporaryDirectory("posture-root")
        for directory in directories { try? FileManager.default.createDirectory(atPath: tree.path + directory, withIntermediateDirectories: true) }
        for (path, bytes) in files { tree.write(String(path.dropFirst()), bytes, mode: 0o644) }
        return tree
    }

    func collect(keyProtection: String? = "tpm") -> [String: String] {
        let tree = materialize()
        let report = PostureCollector.collect(PostureInput(root: tree.path, effectiveUserID: 1000, home: "/home/alice", keyProtection: keyProtection))
        var claims = [String: String]()
        for (name, value) in report.claims { claims[name] = value }
        return claims
    }

    static let luks2Root: FixtureMachine = {
        var machine = FixtureMachine("LUKS2 root, Secure Boot on, TPM 2.0, GNOME locking")
        machine.root("253:0", "ext4", "/dev/mapper/luks-2f9c")
        machine.block("dm-0", majorMinor: "253:0", dmUUID: "CRYPT-LUKS2-2f9c1e6b8d1c4d0f9a7e5b3c1d2e4f60-luks-2f9c", dmName: "luks-2f9c", slaves: ["nvme0n1p3"])
        machine.block("nvme0n1p3")
        machine.osRelease(id: "ubuntu", version: "24.04")
        machine.secureBoot(1)
        machine.tpm(version: "2")
        machine.gnome("lock-on")
        return machine
    }()

    static let lvmOnLuks: FixtureMachine = {
        var machine = FixtureMachine("LVM on LUKS, Secure Boot off, no TPM, GNOME lock off")
        machine.root("253:1", "ext4", "/dev/mapper/vg-root")
        machine.block("dm-1", majorMinor: "253:1", dmUUID: "LVM-Xy12AbCdEfGhIjKlMnOpQrStUvWxYz01Ab23Cd45Ef67Gh89Ij01Kl23Mn", dmName: "vg-root", slaves: ["dm-0"])
        machine.block("dm-0", dmUUID: "CRYPT-LUKS2-aa11bb22cc33dd44ee55ff6600112233-cryptlvm", dmName: "cryptlvm", slaves: ["sda2"])
        machine.block("sda2")
        machine.osRelease(id: "debian", version: "12")
        machine.secureBoot(0)
        machine.directory("/sys/class/block")
        machine.gnome("lock-off")
        return machine
    }()

    static let luksOnLvm: FixtureMachine = {
        var machine = FixtureMachine("LUKS1 on LVM, firmware in setup mode, headless")
        machine.root("253:2", "xfs", "/dev/mapper/root-crypt")
        machine.block("dm-2", majorMinor: "253:2", dmUUID: "CRYPT-LUKS1-0011223344556677889900aabbccddee-root-crypt", dmName: "root-crypt", slaves: ["dm-1"])
        machine.block("dm-1", dmUUID: "LVM-abc", dmName: "vg-lv_root", slaves: ["sda3", "sdb1"])
        machine.block("sda3")
        machine.block("sdb1")
        machine.osRelease(id: "rhel", version: "9.4")
        machine.secureBoot(1, setupMode: 1)
        machine.tpm(version: "2")
        return machine
    }()

    static let plainExt4: FixtureMachine = {
        var machine = FixtureMachine("plain ext4, BIOS, TPM 1.2, GNOME never idle")
        machine.root("8:2", "ext4", "/dev/sda2")
        machine.block("sda2", majorMinor: "8:2")
        machine.osRelease(id: "fedora", version: "40")
        machine.tpm(version: "1")
        machine.gnome("idle-never")
        return machine
    }()

    static let loopRoot: FixtureMachine = {
        var machine = FixtureMachine("root on a loop device backed by a file on an encrypted disk")
        machine.root("7:0", "ext4", "/dev/loop0", extra: "25 1 253:0 / /host rw,relatime - ext4 /dev/mapper/host-crypt rw\n")
        machine.block("loop0", majorMinor: "7:0")
        machine.file("/sys/class/block/loop0/loop/backing_file", "/host/images/root.img\n")
        machine.block("dm-0", majorMinor: "253:0", dmUUID: "CRYPT-PLAIN-host-crypt", dmName: "host-crypt", slaves: ["vda1"])
        machine.block("vda1")
        machine.osRelease(id: "alpine", version: "3.20.1")
        return machine
    }()

    static let btrfsOnLuks: FixtureMachine = {
        var machine = FixtureMachine("btrfs (anonymous device 0:35) on LUKS2, GNOME defaults")
        machine.root("0:35", "btrfs", "/dev/mapper/cryptroot")
        machine.block("dm-0", dmUUID: "CRYPT-LUKS2-99887766554433221100ffeeddccbbaa-cryptroot", dmName: "cryptroot", slaves: ["nvme0n1p2"])
        machine.block("nvme0n1p2")
        machine.osRelease(id: "arch", version: "rolling")
        machine.gnome(nil)
        return machine
    }()

    static let container: FixtureMachine = {
        var machine = FixtureMachine("a container: overlay root, no /sys")
        machine.root("0:50", "overlay", "overlay")
        machine.osRelease(id: "debian", version: "12")
        return machine
    }()

    static let malformed: FixtureMachine = {
        var machine = FixtureMachine("malformed files everywhere")
        machine.file("/proc/self/mountinfo", "garbage\n\u{0}\u{1}\n- - -\n")
        machine.file("/etc/os-release", "\u{0}\u{7f}garbage ===\nID=\"unterminated\nVERSION_ID=$(rm -rf /)\n")
        machine.file("/proc/sys/kernel/osrelease", "")
        machine.bytes("/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", [0x06, 0, 0])
        machine.directory("/sys/class/tpm/tpm0")
        machine.file("/usr/bin/gnome-shell", "")
        machine.bytes("/home/alice/.config/dconf/user", Array("GVariant".utf8) + [UInt8](repeating: 0xFF, count: 40))
        return machine
    }()

    static let all = [luks2Root, lvmOnLuks, luksOnLvm, plainExt4, loopRoot, btrfsOnLuks, container, malformed]
}

@Suite struct PostureFixtureTests {
    @Test(arguments: [
        (FixtureMachine.luks2Root, ["linuxOsVersion": "24.04", "osName": "ubuntu", "kernelVersion": "6.8.0-45-generic", "diskEncryption": "true",
                                    "secureBoot": "true", "trustedPlatformModule": "true", "keyProtection": "tpm", "lockScreen": "true"]),
        (FixtureMachine.lvmOnLuks, ["linuxOsVersion": "12", "osName": "debian", "kernelVersion": "6.8.0-45-generic", "diskEncryption": "true",
                                    "secureBoot": "false", "trustedPlatformModule": "false", "keyProtection": "tpm", "lockScreen": "false"]),
        (FixtureMachine.luksOnLvm, ["linuxOsVersion": "9.4", "osName": "rhel", "kernelVersion": "6.8.0-45-generic", "diskEncryption": "true",
                                    "secureBoot": "false", "trustedPlatformModule": "true", "keyProtection": "tpm"]),
        (FixtureMachine.plainExt4, ["linuxOsVersion": "40", "osName": "fedora", "kernelVersion": "6.8.0-45-generic", "diskEncryption": "false",
                                    "trustedPlatformModule": "false", "keyProtection": "tpm", "lockScreen": "false"]),
        (FixtureMachine.loopRoot, ["linuxOsVersion": "3.20.1", "osName": "alpine", "kernelVersion": "6.8.0-45-generic", "diskEncryption": "true",
                                   "trustedPlatformModule": "false", "keyProtection": "tpm"]),
        (FixtureMachine.btrfsOnLuks, ["linuxOsVersion": "rolling", "osName": "arch", "kernelVersion": "6.8.0-45-generic", "diskEncryption": "true",
                                      "trustedPlatformModule": "false", "keyProtection": "tpm", "lockScreen": "true"]),
        (FixtureMachine.container, ["linuxOsVersion": "12", "osName": "debian", "kernelVersion": "6.8.0-45-generic", "keyProtection": "tpm"]),
        (FixtureMachine.malformed, ["keyProtection": "tpm"]),
    ])
    func eachMachineReportsExactlyWhatIsTrue(machine: FixtureMachine, expected: [String: String]) {
        #expect(machine.collect() == expected)
    }

    @Test func absentClaimsSayWhy() {
        let tree = FixtureMachine.container.materialize()
        let report = PostureCollector.collect(PostureInput(root: tree.path, effectiveUserID: 1000, home: nil, keyProtection: nil))
        let reasons = Dictionary(uniqueKeysWithValues: report.attributes.filter { $0.value == nil }.map { ($0.name, $0.source) })
        #expect(reasons["diskEncryption"]?.contains("overlay") == true)
        #expect(reasons["secureBoot"]?.contains("BIOS") == true)
        #expect(reasons["trustedPlatformModule"] == "/sys is not available")
        #expect(reasons["keyProtection"] == "there is no device key")
        #expect(reasons["lockScreen"]?.contains("gnome-shell is not installed") == true)
        let luksTree = FixtureMachine.lvmOnLuks.materialize()
        let luks = PostureCollector.collect(PostureInput(root: luksTree.path, effectiveUserID: 1000, home: "/home/alice", keyProtection: "software"))
        let disk = luks.attributes.first { $0.name == "diskEncryption" }!
        #expect(disk.source == "/ is ext4 on /dev/mapper/vg-root (253:1); dm-1 is device-mapper LVM; dm-1 sits on dm-0; dm-0 is dm-crypt (CRYPT-LUKS2)", "\(disk.source)")
    }

    /// The user's dconf database is theirs to replace: a FIFO there is not opened (it would hold the
    /// reader for ever: the system agent reads it for every user), a link to a regular file is followed.
    @Test func aDconfDatabaseThatIsNoRegularFileIsNotOpened() throws {
        var machine = FixtureMachine("dconf database replaced by a FIFO")
        machine.file("/usr/bin/gnome-shell", "")
        let tree = machine.materialize()
        try FileManager.default.createDirectory(atPath: tree.path + "/home/alice/.config/dconf", withIntermediateDirectories: true)
        #expect(mkfifo(tree.path + "/home/alice/.config/dconf/user", 0o600) == 0)
        let report = PostureCollector.collect(PostureInput(root: tree.path, effectiveUserID: 1000, home: "/home/alice", keyProtection: nil))
        // Not read: GNOME's defaults apply, as without a database of the user's.
        #expect(report.attributes.first { $0.name == "lockScreen" }?.source.contains("dconf/user") == false, "\(report.attributes)")
    }

    @Test func aLoopDeviceWithoutAKnownBackingIsUnknown() {
        var machine = FixtureMachine("loop without backing file")
        machine.root("7:1", "ext4", "/dev/loop1")
        machine.block("loop1", majorMinor: "7:1")
        #expect(machine.collect()["diskEncryption"] == nil)
    }

    @Test func inventoryIsOptIn() {
        var machine = FixtureMachine.plainExt4
        machine.file("/sys/class/dmi/id/product_name", "Latitude 7440\n")
        machine.file("/sys/class/dmi/id/product_serial", "SERIAL-MUST-NOT-APPEAR\n")
        let tree = machine.materialize()
        let without = PostureCollector.collect(PostureInput(root: tree.path, effectiveUserID: 1000, home: "/home/alice", keyProtection: nil))
        #expect(!without.claims.contains { $0.name == "hardwareModel" })
        let with = PostureCollector.collect(PostureInput(root: tree.path, effectiveUserID: 1000, home: "/home/alice", keyProtection: nil, inventory: true))
        #expect(with.claims.first { $0.name == "hardwareModel" }?.value == "Latitude 7440")
        #expect(!with.claims.contains { $0.value.contains("SERIAL") })
    }

    /// `ClaimName.collectedByDevtrust` is every name devtrust's collectors produce, found or not: a
    /// given claim (`--claim`, the configuration's, an agent's client's) is refused for each of them,
    /// so a collector that produces a name not on the list would let a given value replace a measurement.
    @Test func everyNameTheCollectorsProduceIsListedAsMeasured() {
        var machine = FixtureMachine.plainExt4
        machine.file("/sys/class/dmi/id/product_name", "Latitude 7440\n")
        let tree = machine.materialize()
        for root in [tree.path, "/nonexistent-root"] {
            let report = PostureCollector.collect(PostureInput(root: root, effectiveUserID: 0, home: "/home/alice", keyProtection: "software", inventory: true))
            let names = Set(report.attributes.map(\.name))
            #expect(names == ClaimName.collectedByDevtrust, "\(root): \(names.symmetricDifference(ClaimName.collectedByDevtrust))")
        }
    }

    @Test func osReleaseQuoting() {
        let fields = OSReleaseCollector.parse(Array("A=plain\nB=\"double \\\"quoted\\\"\"\nC='single'\nD=\"unterminated\nE=has space\n# comment\nlower=x\n".utf8))
        #expect(fields == ["A": "plain", "B": "double \"quoted\"", "C": "single"])
    }

    @Test func mountinfoEscapes() {
        func unescape(_ text: String) -> String { DiskEncryptionCollector.unescape(ArraySlice(text.utf8)) }
        #expect(unescape("/media/my\\040disk") == "/media/my disk")
        #expect(unescape("/a\\134b\\011c\\012") == "/a\\b\tc\n")
        // Not an escape: too short, or not octal; kept as written.
        #expect(unescape("/x\\04") == "/x\\04")
        #expect(unescape("/x\\089") == "/x\\089")
    }

    @Test func osReleaseWhitespaceAndLineEndings() {
        let fields = OSReleaseCollector.parse(Array("  ID=debian  \r\nVERSION_ID=\"12\"\t\n\tNAME='Debian GNU/Linux'\nBAD KEY=x\n=empty\n".utf8))
        #expect(fields == ["ID": "debian", "VERSION_ID": "12", "NAME": "Debian GNU/Linux"])
    }
}

@Suite struct GVDBTests {
    static func database(_ name: String) -> GVDBFile? {
        GVDBFile(Array(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/\(name).gvdb"))!))
    }

    @Test func readsTheCommittedDatabases() throws {
        let on = try #require(Self.database("lock-on"))
        #expect(on.value("/org/gnome/desktop/screensaver/lock-enabled") == .bool(true))
        #expect(on.value("/org/gnome/desktop/session/idle-delay") == .uint32(300))
        let off = try #require(Self.database("lock-off"))
        #expect(off.value("/org/gnome/desktop/screensaver/lock-enabled") == .bool(false))
        #expect(off.value("/org/gnome/desktop/interface/clock-format") == .string("24h"))
        #expect(Self.database("idle-never")?.value("/org/gnome/desktop/session/idle-delay") == .uint32(0))
        // A directory is no value, nor is a key's prefix or a longer key.
        #expect(on.value("/org/gnome/desktop/screensaver/") == nil)
        #expect(on.value("/org/gnome/desktop/screensaver/lock-enable") == nil)
        #expect(on.value("/org/gnome/desktop/screensaver/lock-enabledX") == nil)
        #expect(on.value("") == nil)
    }

    /// dconf, when installed, is the reference: its compiler writes the databases, and `dconf read`
    /// (dconf's own reader, from the file, no daemon) says what each key holds; this reader agrees on
    /// every key, present or not, in a database of many keys (so that buckets hold several).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/dconf") || ExternalTool.isCI))
    func agreesWithDconf() throws {
        let directory = TemporaryDirectory("dconf")
        var keyfile = "[org/gnome/desktop/screensaver]\nlock-enabled=false\n\n[org/gnome/desktop/session]\nidle-delay=uint32 4242\n\n[a/b/c]\nname='x y'\ncount=-7\n"
        var expected: [String: GVDBFile.Value] = [
            "/org/gnome/desktop/screensaver/lock-enabled": .bool(false),
            "/org/gnome/desktop/session/idle-delay": .uint32(4242),
            "/a/b/c/name": .string("x y"),
            "/a/b/c/count": .int32(-7),
        ]
        for group in 0..<40 {
            keyfile += "\n[site/g\(group)]\n"
            for key in 0...(group % 7) {
                keyfile += "k\(key)=uint32 \(group * 100 + key)\n"
                expected["/site/g\(group)/k\(key)"] = .uint32(UInt32(group * 100 + key))
            }
        }
        _ = directory.write("keyfiles/00-test", keyfile)
        _ = directory.write("profile", "user-db:user\n")
        try FileManager.default.createDirectory(atPath: directory.file("config/dconf"), withIntermediateDirectories: true)
        let compiled = try ProcessRunner.run("/usr/bin/dconf", ["compile", directory.file("config/dconf/user"), directory.file("keyfiles")])
        #expect(compiled.status == 0, "\(compiled)")
        let compiledBytes = try #require(directory.read("config/dconf/user"))
        let database = try #require(GVDBFile(compiledBytes))
        // (dconf read takes no key that ends with a slash: readsTheCommittedDatabases asks for those.)
        let absent = ["/org/gnome/desktop/screensaver/lock-enable", "/a/b/c", "/a/b/c/namex", "/site/g3/k9", "/nothing", "/a"]
        for key in expected.keys.sorted() + absent {
            let ours = database.value(key)
            let theirs = try Self.dconfRead(key, in: directory)
            #expect(Self.text(of: ours) == theirs, "\(key): ours \(String(describing: ours)), dconf \(theirs)")
            #expect(ours == expected[key], "\(key)")
        }
    }

    /// What `dconf read KEY` prints for the database at config/dconf/user of `directory`.
    static func dconfRead(_ key: String, in directory: TemporaryDirectory) throws -> String {
        let result = try ProcessRunner.run("/usr/bin/dconf", ["read", key], environment: [
            "PATH": "/usr/bin:/bin", "HOME": directory.path, "XDG_CONFIG_HOME": directory.file("config"),
            "XDG_RUNTIME_DIR": directory.path, "DCONF_PROFILE": directory.file("profile"),
        ])
        guard result.status == 0 else { throw FixtureError("dconf read \(key): \(result)") }
        return result.output
    }

    /// A value as `dconf read` prints it (GVariant's text format), "" for none.
    static func text(of value: GVDBFile.Value?) -> String {
        switch value {
        case nil: ""
        case let .bool(flag)?: flag ? "true" : "false"
        case let .uint32(number)?: "uint32 \(number)"
        case let .int32(number)?: "\(number)"
        case let .string(text)?: "'\(text)'"
        case let .other(type)?: "<\(type)>"
        }
    }

    /// The user's database is theirs to write, and the system agent reads it for every token: files
    /// crafted so that building every key is quadratic (items whose 64 KB names chain through 62
    /// parents; values that each span the file) cost the old reader 33 s per 64 KB (hours at this
    /// size), holding the agent. A lookup reads one bucket: these answer at once, as dconf's does.
    @Test(.timeLimit(.minutes(1))) func craftedDatabasesCostALookupNoMore() throws {
        for mode in ["keys", "values"] {
            let database = try #require(GVDBFile(Self.crafted(size: 1 << 20, mode: mode)), "\(mode)")
            for _ in 0..<100 {
                #expect(database.value(LockScreenCollector.lockEnabledKey) == nil, "\(mode)")
                #expect(database.value(LockScreenCollector.idleDelayKey) == nil, "\(mode)")
            }
        }
        // Every item in the key's bucket with the key's hash: each is compared, and fails on its last segment.
        let lockHash = GVDBFile.hash(Array(LockScreenCollector.lockEnabledKey.utf8))
        let database = try #require(GVDBFile(Self.crafted(size: 1 << 20, mode: "keys", hash: lockHash)))
        for _ in 0..<100 { #expect(database.value(LockScreenCollector.lockEnabledKey) == nil) }
        // Empty names chained 62 deep, each item of the key's hash: every one would walk its whole chain.
        let chained = try #require(GVDBFile(Self.crafted(size: 2 << 20, mode: "empty", hash: lockHash)))
        for _ in 0..<100 { #expect(chained.value(LockScreenCollector.lockEnabledKey) == nil) }
    }

    /// A GVDB file of `size` bytes whose hash table has no bloom filter, one bucket, and every item
    /// (24 bytes each) made to cost the most: "keys": a 64 KB name (from the file's start) chained to
    /// the item before it, up to 62 deep; "values": a value that spans the whole file. `hash`: each item's.
    static func crafted(size: Int, mode: String, hash: UInt32 = 0) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        func put32(_ value: UInt32, at offset: Int) { for byte in 0..<4 { bytes[offset + byte] = UInt8(truncatingIfNeeded: value >> (8 * byte)) } }
        func put16(_ value: UInt16, at offset: Int) { for byte in 0..<2 { bytes[offset + byte] = UInt8(truncatingIfNeeded: value >> (8 * byte)) } }
        bytes.replaceSubrange(0..<8, with: Array("GVariant".utf8))
        put32(24, at: 16)
        put32(UInt32(size), at: 20)
        put32(0, at: 24)  // no bloom filter
        put32(1, at: 28)  // one bucket
        put32(0, at: 32)  // which starts at item 0
        let itemsStart = 36
        for index in 0..<((size - itemsStart) / 24) {
            let base = itemsStart + 24 * index
            put32(hash, at: base)
            if mode == "keys" || mode == "empty" {
                put32(index == 0 ? UInt32.max : UInt32(min(index - 1, 62)), at: base + 4)
                put32(0, at: base + 8)
                put16(mode == "keys" ? UInt16.max : 0, at: base + 12)
            } else {
                put32(UInt32.max, at: base + 4)
                put32(0, at: base + 8)
                put16(1, at: base + 12)
                put32(0, at: base + 16)
                put32(UInt32(size), at: base + 20)
            }
            bytes[base + 14] = UInt8(ascii: "v")
        }
        return bytes
    }

    @Test func garbageNeverCrashes() {
        var generator = SystemRandomNumberGenerator()
        let valid = Array(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/lock-on.gvdb"))!)
        for _ in 0..<3000 {
            var bytes = valid
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator))) }
            _ = GVDBFile(bytes).map { ($0.value(LockScreenCollector.lockEnabledKey), $0.value(LockScreenCollector.idleDelayKey)) }
        }
    }
}

/// On this machine: the claims agree with what /etc/os-release and /proc say.
@Suite struct PostureOnThisMachineTests {
    @Test func claimsMatchTheSystemFiles() throws {
        // Not as root even when the tests run as root: root's firewall check starts nft, which the
        // fast tier refuses (and which this test does not check).
        let report = PostureCollector.collect(PostureInput(effectiveUserID: 65534, home: ProcessInfo.processInfo.environment["HOME"], keyProtection: "software"))
        var claims = [String: String]()
        for (name, value) in report.claims { claims[name] = value }
        let osRelease = String(decoding: FileManager.default.contents(atPath: "/etc/os-release") ?? Data(), as: UTF8.self)
        let versionLine = osRelease.split(separator: "\n").first { $0.hasPrefix("VERSION_ID=") }
        #expect(claims["linuxOsVersion"] == versionLine.map { String($0.dropFirst("VERSION_ID=".count)).replacingOccurrences(of: "\"", with: "") })
        let release = try String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(claims["kernelVersion"] == release)
        // The root file system's device, from /proc itself.
        let rootLine = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8).split(separator: "\n").last { $0.split(separator: " ")[4] == "/" }
        let source = rootLine.map { line -> String in let fields = line.split(separator: " "); return String(fields[fields.firstIndex(of: "-")! + 2]) } ?? ""
        if source.hasPrefix("/dev/mapper/") || source.hasPrefix("/dev/dm-") {
            #expect(claims["diskEncryption"] != "false" || !FileManager.default.fileExists(atPath: "/sys/class/block"))
        } else if source.hasPrefix("/dev/sd") || source.hasPrefix("/dev/vd") || source.hasPrefix("/dev/nvme") {
            #expect(claims["diskEncryption"] == "false", "\(source): \(report.attributes)")
        }
        #expect(claims["trustedPlatformModule"] == (FileManager.default.fileExists(atPath: "/sys/class/tpm/tpm0") ? claims["trustedPlatformModule"] : "false"))
        #expect(claims["keyProtection"] == "software")
    }
}

@Suite struct FirewallVerdictTests {
    @Test func anInputChainThatDropsByPolicyIsAFirewall() throws {
        let dropping = #"{"nftables":[{"metainfo":{"version":"1.0.6"}},{"table":{"family":"inet","name":"filter","handle":1}},{"chain":{"family":"inet","table":"filter","name":"input","handle":1,"type":"filter","hook":"input","prio":0,"policy":"drop"}},{"chain":{"family":"inet","table":"filter","name":"output","handle":2,"type":"filter","hook":"output","prio":0,"policy":"accept"}}]}"#
        let verdict = FirewallCollector.verdict(try JSONParser.parse(dropping))
        #expect(verdict.value == "true" && verdict.source == "nftables input chain inet filter input has policy drop")
        let accepting = #"{"nftables":[{"chain":{"family":"inet","table":"filter","name":"input","hook":"input","policy":"accept"}}]}"#
        #expect(FirewallCollector.verdict(try JSONParser.parse(accepting)).value == nil)
        #expect(FirewallCollector.verdict(try JSONParser.parse(#"{"nftables":[]}"#)).source == "no nftables input chain is active")
        #expect(FirewallCollector.verdict(try JSONParser.parse("[1]")).value == nil)
    }
}
