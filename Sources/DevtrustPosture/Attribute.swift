import DevtrustSystem

/// One device attribute: its value, or why it is left out, and where it came from.
public struct Attribute: Equatable, Sendable {
    public let name: String
    /// nil: not determined, so not sent (never guessed).
    public let value: String?
    /// What was read and what it said, for `devtrust attributes --explain`.
    public let source: String

    public init(name: String, value: String?, source: String) {
        self.name = name
        self.value = value
        self.source = source
    }

    static func absent(_ name: String, _ why: String) -> Attribute {
        Attribute(name: name, value: nil, source: why)
    }
}

/// What the collectors need to know besides the file system.
public struct PostureInput: Sendable {
    /// Prefix of every path read: "" on the machine, a fixture tree in tests.
    public var root: String
    public var effectiveUserID: UInt32
    /// The user's home directory (for the dconf database), without the root prefix.
    public var home: String?
    public var xdgConfigHome: String?
    /// Whose home it is, when not this process's user's (the system agent reads a client's desktop
    /// settings): their files there are read with their file-system identity and must be theirs.
    public var homeOwner: FileOwner?
    /// "tpm" or "software": the device key's backend, when there is a key.
    public var keyProtection: String?
    /// Admin opt-in for `hardwareModel` (privacy by default).
    public var inventory: Bool

    public init(root: String = "", effectiveUserID: UInt32, home: String?, xdgConfigHome: String? = nil,
                keyProtection: String?, inventory: Bool = false, homeOwner: FileOwner? = nil) {
        self.root = root
        self.effectiveUserID = effectiveUserID
        self.home = home
        self.xdgConfigHome = xdgConfigHome
        self.keyProtection = keyProtection
        self.inventory = inventory
        self.homeOwner = homeOwner
    }

    func path(_ absolute: String) -> String { root + absolute }
}
