import DevtrustKeystore
import DevtrustURL

/// How a front end names the registration a device token is for.
public enum RegistrationChoice: Sendable, Equatable {
    /// `--server URL|NAME` (`token`, `login --server`, a profile's server): the registration with
    /// that server (its URL, or its host, or host and path); nil: the only one.
    case server(String?)
    /// A provider known by its URLs (`--discovery`, a profile's discovery document): the registration on
    /// the origin of `destination` (the authorization endpoint, where the token goes: it is good only at
    /// the server it was registered with), and among several there, the one whose base URL the provider's
    /// URLs (its issuer too) are below (`https://idp/t/acme` for `https://idp/t/acme/oauth2/token`).
    case provider(destination: String, providerURLs: [String])
    /// `--device-id ID`: the token names this id as given, registered or not, whatever key registered
    /// it; the registration with that id, if any, only sets the token's clock (its server's).
    case deviceID(String)
    /// A registration chosen from an earlier read of the keystore (login's, the native host's endpoint
    /// list), before the key was loaded: checked again against the key now at hand.
    case chosen(RegistrationRecord)
}

/// What a device token is minted for: the device id it names, and the registration
/// (nil only for a `--device-id` that names none).
public struct SelectedRegistration: Sendable, Equatable {
    public let deviceID: String
    public let registration: RegistrationRecord?

    public init(deviceID: String, registration: RegistrationRecord?) {
        self.deviceID = deviceID
        self.registration = registration
    }
}

/// The one rule that picks the registration a device token is for, whichever front end asks
/// (`token`, `device-data`'s caller, `login`, `authorize-url`, the native host).
public enum RegistrationSelector {
    /// The registration `choice` names in `state`. Every choice but `deviceID` must name exactly one
    /// registration (else `notRegistered` or `ambiguousRegistration`), made with `state`'s key (else
    /// `registrationForOtherKey`: its tokens would be refused). `destinations`: the URLs the token is
    /// sent to; each must be on the registration's origin (else `tokenGoesElsewhere`): a device token
    /// is good only at the server it was registered with, and goes nowhere else.
    public static func select(from state: KeystoreState, _ choice: RegistrationChoice,
                              sendingTo destinations: [String] = []) throws(DeviceError) -> SelectedRegistration {
        let registration: RegistrationRecord
        switch choice {
        case let .deviceID(id):
            return SelectedRegistration(deviceID: id, registration: state.registrations.first { $0.registrationId == id })
        case let .server(server):
            let candidates = server.map { wanted in state.registrations.filter { matches($0.server, wanted) } } ?? state.registrations
            registration = try only(candidates, server: server)
        case let .provider(destination, providerURLs):
            registration = try provider(state, destination: destination, providerURLs: providerURLs)
        case let .chosen(chosen):
            registration = chosen
        }
        guard isMadeWithKey(registration, of: state) else {
            throw .registrationForOtherKey(registrationId: registration.registrationId, server: registration.server)
        }
        let home = Origin.text(of: registration.server)
        if let elsewhere = destinations.first(where: { Origin.text(of: $0) != home }) {
            throw .tokenGoesElsewhere(destination: Origin.text(of: elsewhere), server: home)
        }
        return SelectedRegistration(deviceID: registration.registrationId, registration: registration)
    }

    /// Whether `registration` was made with `state`'s key: a server accepts tokens naming it only
    /// then. Without a key there is nothing to tell it from (and nothing to sign with).
    public static func isMadeWithKey(_ registration: RegistrationRecord, of state: KeystoreState) -> Bool {
        state.key.map { $0.fingerprint == registration.keyFingerprint } ?? true
    }

    private static func only(_ candidates: [RegistrationRecord], server: String?) throws(DeviceError) -> RegistrationRecord {
        guard let first = candidates.first else { throw .notRegistered(server: server) }
        guard candidates.count == 1 else { throw .ambiguousRegistration(servers: candidates.map(\.server)) }
        return first
    }

    private static func provider(_ state: KeystoreState, destination: String, providerURLs: [String]) throws(DeviceError) -> RegistrationRecord {
        let providerURLs = [destination] + providerURLs
        // On the destination's origin, and a base URL the provider's URLs are below, in its own tenant
        // (a registration in /t/acme, or at the root, is not for /t/other); the longest such base is the
        // most specific.
        let below = state.registrations.filter { record in
            guard Origin.text(of: record.server) == Origin.text(of: destination) else { return false }
            let base = ServerName(record.server).location
            // Below the base, and not in a tenant the base is not (a root registration is not one in /t/other).
            return providerURLs.contains { url in
                let location = ServerName(url).location
                guard location == base || location.hasPrefix(base + "/") else { return false }
                return !location.dropFirst(base.count).hasPrefix("/t/")
            }
        }
        let longest = below.map { ServerName($0.server).location.count }.max()
        return try only(below.filter { ServerName($0.server).location.count == longest }, server: Origin.text(of: destination))
    }

    /// Whether two recorded server URLs are the same server.
    public static func sameServer(_ first: String, _ second: String) -> Bool {
        ServerName(first) == ServerName(second)
    }

    /// `https://Host:443/t/acme/` names the same server as `https://host/t/acme`;
    /// a NAME is the URL without its scheme, or just the host (and port).
    public static func matches(_ recorded: String, _ wanted: String) -> Bool {
        let recordedName = ServerName(recorded)
        let wantedName = ServerName(wanted)
        if wantedName.isURL { return recordedName == wantedName }
        return wantedName.location == recordedName.location || wantedName.location == recordedName.authority
    }
}

/// A server as the keystore records it or a user names it: its origin's scheme and authority
/// (`Origin`), and its location, the authority and the rest as written without trailing slashes.
/// A NAME without a scheme is read as an authority and path (`localhost:9443`, `idp/t/acme`):
/// no default port is dropped from it, as no scheme says which.
private struct ServerName: Equatable {
    let isURL: Bool
    let scheme: String
    let authority: String
    let location: String

    init(_ text: String) {
        var reference = URLReference(text)
        isURL = reference.scheme != nil && reference.authority != nil
        if !isURL { reference = URLReference("//" + text) }
        let scheme = reference.scheme ?? ""
        let written = reference.authority ?? ""
        // An authority with no origin (a port that is no number) is compared as written, in lower case.
        authority = Origin(scheme: scheme, authority: written)?.authority ?? written.lowercased()
        self.scheme = Origin.normalizedScheme(scheme)
        var rest = reference.path + (reference.query.map { "?" + $0 } ?? "") + (reference.fragment.map { "#" + $0 } ?? "")
        while rest.hasSuffix("/") { rest.removeLast() }
        location = authority + rest
    }
}
