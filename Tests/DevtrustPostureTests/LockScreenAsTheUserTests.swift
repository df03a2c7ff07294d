@testable import DevtrustPosture
import DevtrustSystem
import DevtrustTestSupport
import Foundation
import Testing

/// The system agent runs as root and reads each client's desktop settings (`lockScreen`) from the
/// client's home, which is theirs to arrange: a link there to another user's dconf database, or to a
/// file of root's, must not be read with root's rights. Real users (useradd): the kernel decides
/// what each may open, with the file-system identity the agent takes for the read.
@Suite(.enabled(if: LocalUser.canMake)) struct LockScreenAsTheUserTests {
    /// A machine below `tree`: GNOME installed, alice's database (screen lock on) in her 0700 home.
    struct Machine {
        let tree = TemporaryDirectory("lockscreen-users")
        let alice: LocalUser
        let bob: LocalUser

        init() throws {
            alice = try LocalUser("alice")
            bob = try LocalUser("bob")
            _ = tree.write("usr/bin/gnome-shell", "", mode: 0o755)
            let lockOn = Array(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/lock-on.gvdb"))!)
            let lockOff = Array(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/lock-off.gvdb"))!)
            tree.write("home/alice/.config/dconf/user", lockOn)
            tree.write("home/bob/.config/dconf/user-own", lockOff)
            tree.write("etc/root-owned-lock-on", lockOn, mode: 0o644)
            try alice.own(tree.file("home/alice"))
            try bob.own(tree.file("home/bob"))
            // The tree is the test's (0700, root's): the homes below it must be reachable by their users.
            chmod(tree.path, 0o755)
            for path in ["home", "usr", "usr/bin", "etc"] { chmod(tree.file(path), 0o755) }
            chmod(tree.file("home/alice"), 0o700)
            chmod(tree.file("home/bob"), 0o700)
        }

        /// bob's dconf database: a link to `target` (or his own, lock off, when nil).
        func link(bobsDatabaseTo target: String?) throws {
            let path = tree.file("home/bob/.config/dconf/user")
            unlink(path)
            #expect(symlink(target ?? tree.file("home/bob/.config/dconf/user-own"), path) == 0)
            _ = lchown(path, bob.uid, bob.gid)
        }

        /// `lockScreen` as the agent collects it for `user`: as root, reading their home as them
        /// (`asTheUser`), or as root (`asTheUser: false`, the agent before).
        func lockScreen(for user: LocalUser, home: String, asTheUser: Bool = true) -> Attribute {
            LockScreenCollector.collect(PostureInput(root: tree.path, effectiveUserID: 0, home: home, keyProtection: "software",
                                                     homeOwner: asTheUser ? FileOwner(uid: user.uid, gid: user.gid) : nil))
        }
    }

    @Test func aUsersOwnDatabaseIsReadAsThem() throws {
        let machine = try Machine()
        #expect(machine.lockScreen(for: machine.alice, home: "/home/alice").value == "true")
        try machine.link(bobsDatabaseTo: nil)
        let bobs = machine.lockScreen(for: machine.bob, home: "/home/bob")
        #expect(bobs.value == "false", "\(bobs)")
        #expect(bobs.source.contains("dconf/user"), "\(bobs)")
    }

    /// bob links his database to alice's (her screen locks; his does not). As root, the agent read
    /// hers and said bob's screen locks; as bob, the kernel refuses (her home is 0700), and the claim
    /// is unknown rather than hers.
    @Test func aLinkToAnotherUsersDatabaseIsNotFollowedAsRoot() throws {
        let machine = try Machine()
        try machine.link(bobsDatabaseTo: machine.tree.file("home/alice/.config/dconf/user"))
        // The attack, as the agent read it before: alice's setting, taken for bob's.
        #expect(machine.lockScreen(for: machine.bob, home: "/home/bob", asTheUser: false).value == "true")
        let read = machine.lockScreen(for: machine.bob, home: "/home/bob")
        #expect(read.value == nil, "\(read)")
        #expect(read.source.contains("Permission denied") == true, "\(read)")
    }

    /// A link to a file bob may read but that is not his (root's, world-readable): refused too, by owner.
    @Test func aLinkToAFileThatIsNotTheirsIsNotRead() throws {
        let machine = try Machine()
        try machine.link(bobsDatabaseTo: machine.tree.file("etc/root-owned-lock-on"))
        #expect(machine.lockScreen(for: machine.bob, home: "/home/bob", asTheUser: false).value == "true")
        let read = machine.lockScreen(for: machine.bob, home: "/home/bob")
        #expect(read.value == nil, "\(read)")
        #expect(read.source.contains("owned by uid 0, not by uid \(machine.bob.uid)") == true, "\(read)")
    }

    /// The reader takes bob's identity for the read only: afterwards the thread is root's again.
    @Test func theReaderIsRootAgainAfterwards() throws {
        let machine = try Machine()
        try machine.link(bobsDatabaseTo: nil)
        _ = machine.lockScreen(for: machine.bob, home: "/home/bob")
        #expect(try FileReader.readRegularFile(machine.tree.file("home/alice/.config/dconf/user")).count > 0)
    }
}
