/// The names of device-token claims, in one place: those devtrust sets on every
/// token, those a Linux agent must never send, and what a name users and
/// administrators add may be (the configuration, `--claim`, a collector).
public enum ClaimName {
    /// Set by devtrust itself on every token: never taken from elsewhere.
    public static let setByDevtrust: Set<String> = ["jti", "iat"]
    /// For Play Integrity / App Attest only: a Linux device must never send one
    /// (the server would mark it as failing integrity; server contract, section 2).
    public static let forbidden: Set<String> = ["attestationToken"]
    /// Every name that no attribute may have.
    public static let reserved = setByDevtrust.union(forbidden)

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
}
