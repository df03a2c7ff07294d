import DevtrustKeystore

/// Picks the registration a device token is for: the one matching `--server`
/// (its URL, or its host, or host and path), or the only one.
public enum RegistrationSelector {
    public static func select(from state: KeystoreState, server: String?) throws(DeviceError) -> RegistrationRecord {
        let candidates: [RegistrationRecord]
        if let server {
            candidates = state.registrations.filter { matches($0.server, server) }
        } else {
            candidates = state.registrations
        }
        guard let first = candidates.first else { throw .notRegistered(server: server) }
        guard candidates.count == 1 else { throw .ambiguousRegistration(servers: candidates.map(\.server)) }
        if let key = state.key, first.keyFingerprint != key.fingerprint {
            throw .registrationForOtherKey(registrationId: first.registrationId, server: first.server)
        }
        return first
    }

    /// The registration for a provider known by its URLs, as with `--discovery`: one on the origin
    /// of `destination` (the authorization endpoint: the token goes there, and is good only at the
    /// server it was registered with), and among several there, the one whose base URL the
    /// provider's URLs (its issuer too) are below (`https://idp/t/acme` for `https://idp/t/acme/oauth2/token`).
    public static func select(from state: KeystoreState, destination: String, providerURLs: [String]) throws(DeviceError) -> RegistrationRecord {
        let providerURLs = [destination] + providerURLs
        // On the destination's origin, and a base URL the provider's URLs are below, in its own tenant
        // (a registration in /t/acme, or at the root, is not for /t/other); the longest such base is the
        // most specific.
        let below = state.registrations.filter { record in
            guard ClockSkew.origin(of: record.server) == ClockSkew.origin(of: destination) else { return false }
            let base = normalized(record.server).location
            // Below the base, and not in a tenant the base is not (a root registration is not one in /t/other).
            return providerURLs.contains { url in
                let location = normalized(url).location
                guard location == base || location.hasPrefix(base + "/") else { return false }
                return !location.dropFirst(base.count).hasPrefix("/t/")
            }
        }
        let longest = below.map { normalized($0.server).location.count }.max()
        let candidates = below.filter { normalized($0.server).location.count == longest }
        guard let first = candidates.first else { throw .notRegistered(server: ClockSkew.origin(of: destination)) }
        guard candidates.count == 1 else { throw .ambiguousRegistration(servers: candidates.map(\.server)) }
        if let key = state.key, first.keyFingerprint != key.fingerprint {
            throw .registrationForOtherKey(registrationId: first.registrationId, server: first.server)
        }
        return first
    }


    /// Whether two recorded server URLs are the same server.
    public static func sameServer(_ first: String, _ second: String) -> Bool {
        normalized(first) == normalized(second)
    }

    /// `https://Host:443/t/acme/` names the same server as `https://host/t/acme`;
    /// a NAME is the URL without its scheme, or just the host.
    public static func matches(_ recorded: String, _ wanted: String) -> Bool {
        let recordedParts = normalized(recorded)
        let wantedParts = normalized(wanted)
        if wanted.includes("://") { return recordedParts == wantedParts }
        return wantedParts.location == recordedParts.location || wantedParts.location == recordedParts.host
    }

    private static func normalized(_ url: String) -> (scheme: String, host: String, location: String) {
        var rest = Substring(url)
        var scheme = ""
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            scheme = rest[..<colon].lowercased()
            rest = rest[rest.index(colon, offsetBy: 3)...]
        }
        while rest.hasSuffix("/") { rest = rest.dropLast() }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var host = rest[..<slash].lowercased()
        if scheme == "https" && host.hasSuffix(":443") { host.removeLast(4) }
        if scheme == "http" && host.hasSuffix(":80") { host.removeLast(3) }
        return (scheme, host, host + rest[slash...])
    }
}
