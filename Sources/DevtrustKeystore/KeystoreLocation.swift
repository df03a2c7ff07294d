/// Where the keystore lives when `--keystore` is not given (see the CLI contract).
public enum KeystoreLocation {
    public static let systemDirectory = "/var/lib/devtrust"

    /// `DEVTRUST_KEYSTORE`, then `/var/lib/devtrust` for root, then
    /// `$XDG_DATA_HOME/devtrust`, then `$HOME/.local/share/devtrust`.
    public static func resolve(explicit: String?, environment: [String: String], effectiveUserID: UInt32) -> String? {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["DEVTRUST_KEYSTORE"], !fromEnvironment.isEmpty { return fromEnvironment }
        if effectiveUserID == 0 { return systemDirectory }
        // XDG: a relative XDG_DATA_HOME is invalid and must be ignored.
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") { return dataHome + "/devtrust" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/share/devtrust" }
        return nil
    }
}
