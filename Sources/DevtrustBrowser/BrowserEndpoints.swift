import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignIn
import DevtrustTerminal
import DevtrustURL

/// The authorization endpoints a browser navigation may carry a device token
/// to, each with the registration whose device id the token names: for every
/// registration of the current key, its server's WSO2 path
/// (`{base}/oauth2/authorize`, a tenant's base included); for every sign-in
/// profile of the configuration whose server this device is registered with,
/// its configured authorization endpoint, or its discovery document's.
package struct BrowserEndpoints {
    package struct Entry: Equatable {
        package let endpoint: AuthorizationEndpoint
        package let registration: RegistrationRecord
    }

    /// By endpoint, in order; an endpoint listed twice keeps its first registration.
    package private(set) var entries: [Entry] = []

    package var endpoints: [AuthorizationEndpoint] { entries.map(\.endpoint).sorted() }

    /// `config`'s `revision`: SHA-256 of the sorted endpoints, one a line, in hex.
    package var revision: String {
        Hex.encode(SHA256.hash(Array(endpoints.map(\.description).joined(separator: "\n").utf8)).bytes)
    }

    package func entry(for endpoint: AuthorizationEndpoint) -> Entry? {
        entries.first { $0.endpoint == endpoint }
    }

    /// The registrations' endpoints (no network).
    package static func registered(_ state: KeystoreState) -> BrowserEndpoints {
        var endpoints = BrowserEndpoints()
        for registration in currentRegistrations(state) {
            if let endpoint = try? AuthorizationEndpoint(endpoint: registration.server + "/oauth2/authorize") {
                endpoints.add(Entry(endpoint: endpoint, registration: registration))
            }
        }
        return endpoints
    }

    /// The registrations made with the current key.
    package static func currentRegistrations(_ state: KeystoreState) -> [RegistrationRecord] {
        guard state.key != nil else { return [] }
        return state.registrations.filter { RegistrationSelector.isMadeWithKey($0, of: state) }
    }

    /// The discovery documents `addProfiles` asks for: those of profiles without a configured
    /// authorization endpoint, on the origin of a server this device is registered with.
    package static func discoveryURLs(_ configuration: Configuration, state: KeystoreState) -> [String] {
        guard state.key != nil else { return [] }
        let origins = Set(currentRegistrations(state).map { Origin.text(of: $0.server) })
        return configuration.signInProfiles.keys.sorted().compactMap { name in
            let profile = configuration.signInProfiles[name]!
            guard profile.endpoints["authorization"] == nil, let discovery = profile.discovery, origins.contains(Origin.text(of: discovery)) else { return nil }
            return discovery
        }
    }

    /// Adds the sign-in profiles' endpoints, in the order of their names. A profile
    /// whose endpoint cannot be known (discovery fails) is left out with a line
    /// through `note` (the host's stderr); one that no registration serves is left
    /// out, its discovery document not even fetched when it is on no registered origin.
    package mutating func addProfiles(_ configuration: Configuration, state: KeystoreState,
                              discover: (String) throws -> AuthorizationServer, note: (String) -> Void) {
        guard state.key != nil else { return }
        for name in configuration.signInProfiles.keys.sorted() {
            let profile = configuration.signInProfiles[name]!
            var issuer: String?
            let authorization: String
            if let configured = profile.endpoints["authorization"] {
                authorization = configured
            } else if let discovery = profile.discovery {
                // No request to a server this device is not registered with: its endpoint would be left out anyway.
                let origin = Origin.text(of: discovery)
                guard Self.currentRegistrations(state).contains(where: { Origin.text(of: $0.server) == origin }) else { continue }
                do {
                    let server = try discover(discovery)
                    guard let advertised = server.authorization else {
                        note("sign-in profile \(name): \(discovery) advertises no authorization_endpoint; left out")
                        continue
                    }
                    authorization = advertised
                    issuer = server.issuer
                } catch {
                    note("sign-in profile \(name): \(ErrorReport.from(error).summary); left out")
                    continue
                }
            } else if let server = profile.server {
                authorization = server + "/oauth2/authorize"
            } else {
                continue
            }
            guard let endpoint = try? AuthorizationEndpoint(endpoint: authorization) else {
                note("sign-in profile \(name): \(authorization) is not an https URL without query or fragment; left out")
                continue
            }
            // As `login` picks the registration for a sign-in's device token (the one rule): the token goes
            // only to the server (origin and tenant) the device is registered with.
            let choice: RegistrationChoice = if let server = profile.server, profile.discovery == nil {
                .server(server)
            } else {
                .provider(destination: authorization, providerURLs: [issuer].compactMap { $0 })
            }
            guard let registration = try? RegistrationSelector.select(from: state, choice, sendingTo: [authorization]).registration,
                  Self.currentRegistrations(state).contains(registration) else { continue }
            add(Entry(endpoint: endpoint, registration: registration))
        }
    }

    private mutating func add(_ entry: Entry) {
        if !entries.contains(where: { $0.endpoint == entry.endpoint }) { entries.append(entry) }
    }
}
