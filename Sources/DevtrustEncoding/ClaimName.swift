/// The names of device-token claims, in one place: those devtrust sets on every
/// token, those a Linux agent must never send, those devtrust's collectors
/// measure, and what a name users and administrators add may be (the
/// configuration, `--claim`, a client of the agent, a collector).
public enum ClaimName {
    /// Set by devtrust itself on every token: never taken from elsewhere.
    public static let setByDevtrust: Set<String> = ["jti", "iat"]
    /// For Play Integrity / App Attest only: a Linux device must never send one
    /// (the server would mark it as failing integrity; server contract, section 2).
    public static let forbidden: Set<String> = ["attestationToken"]
    /// Every name that no attribute may have.
    public static let reserved = setByDevtrust.union(forbidden)
    /// What devtrust decides itself and no given claim replaces: the names above, the
    /// header's `deviceId`, the `platform` (the configuration's `platform` field sets it)
    /// and `keyProtection` (where the key is).
    public static let reservedForGivenClaims = reserved.union(["platform", "deviceId", "keyProtection"])
    /// The names devtrust's own collectors produce (docs/posture.md), whether or not they
    /// found a value this time: a value given for one would replace, or stand in for, a
    /// measurement. `PostureCollector` produces no other (DevtrustPostureTests check it).
    public static let collectedByDevtrust: Set<String> = ["linuxOsVersion", "osName", "kernelVersion", "diskEncryption", "secureBoot",
                                                          "trustedPlatformModule", "keyProtection", "lockScreen", "firewall", "hardwareModel"]

    /// Why `name` cannot be used as a claim, or nil when it can.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "a claim name must not be empty" }
        if setByDevtrust.contains(name) { return "\(name) is set by devtrust on every token and cannot be overridden" }
        if forbidden.contains(name) {
            return "\(name) is for Play Integrity / App Attest only; a Linux device must not send one (the server would mark it as failing integrity)"
        }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { return "a claim name must not contain control characters" }
        return nil
    }

    /// Why a claim given by hand (`--claim`, the configuration's `claims`, a client of the agent)
    /// cannot be named `name`, or nil when it can: what `problem(with:)` says, and the names devtrust
    /// decides or measures itself, which a given value would only make untrue. (The names an
    /// administrator's collector produces are known only once it ran: `DeviceAttributesForKey`.)
    public static func givenClaimProblem(with name: String) -> String? {
        if let problem = problem(with: name) { return problem }
        if reservedForGivenClaims.contains(name) { return "\(name) is set by devtrust itself and cannot be given" }
        if collectedByDevtrust.contains(name) {
            return "\(name) is measured by devtrust (`devtrust attributes --explain` shows how); a given value cannot replace a measured one"
        }
        return nil
    }
}
