import DevtrustErrors
import DevtrustKeystore

/// The device is not in the state a command needs.
public enum DeviceError: Error, Equatable, Sendable, CustomStringConvertible {
    case noDeviceKey(keystore: String)
    /// `init --backend X` when a key of another backend exists.
    case keyExistsWithOtherBackend(existing: String, requested: String)
    /// `init --backend X --import FILE` where FILE holds a key of another backend.
    case importedKeyBackend(requested: String, found: String)
    case notRegistered(server: String?)
    case ambiguousRegistration(servers: [String])
    /// The registration was made with a key that is no longer the device key.
    case registrationForOtherKey(registrationId: String, server: String)
    /// A device token would go to `destination`, another origin than its registration's `server`.
    case tokenGoesElsewhere(destination: String, server: String)
    case notSignedIn(server: String?)
    case ambiguousSignIn(names: [String])
    /// The server refused the refresh; the stored tokens were dropped.
    case refreshRefused(String)
    /// The refresh failed without saying the grant is dead: the sign-in is kept.
    /// `mayPass`: an outage or a proxy's answer (a network failure), else the server's refusal.
    case refreshFailed(place: String, reason: String, mayPass: Bool)
    /// The key was replaced (init --force) while a registration flow ran.
    case keyChangedDuringRegistration
    /// The user has as many registrations as a keystore keeps for one user.
    case tooManyRegistrations(limit: Int)
    /// The keystore holds as many registrations as it keeps, every user's together (the machine keystore).
    case keystoreFull(limit: Int)
    /// The sign-in's tokens are DPoP-bound to a key (its thumbprint) that is no longer the device key.
    case dpopKeyChanged(boundTo: String, deviceKey: String)
    /// The sign-in's tokens are bearer tokens: no proof goes with them.
    case notDPoPBound(server: String)

    /// What failed; what to do.
    public var description: String { classification.message }
}

extension DeviceError: ClassifiedError {
    /// Each case's category, what failed and what to do, joined by "; " in the message.
    public var classification: ErrorClassification {
        func classified(_ category: ErrorCategory, _ summary: String, _ hint: String?) -> ErrorClassification {
            ErrorClassification(category, summary: summary, hint: hint.map { ErrorHint($0, joinedBy: "; ") })
        }
        switch self {
        case let .noDeviceKey(keystore):
            return classified(.noDeviceKey, "there is no device key in \(keystore)", "run `devtrust init` first")
        case let .keyExistsWithOtherBackend(existing, requested):
            return classified(.failure, "a \(existing) device key already exists",
                              "`devtrust init --backend \(requested) --force` replaces it (and forgets its registrations)")
        case let .importedKeyBackend(requested, found):
            return classified(.usage, "--backend \(requested) was asked for, but the imported file holds a \(found) key", nil)
        case let .notRegistered(server):
            return classified(.notRegistered, "this device is not registered with \(server ?? "any server")",
                              "run `devtrust register --server URL`, or pass --device-id")
        case let .ambiguousRegistration(servers):
            return classified(.usage, "this device is registered with several servers (\(servers.joined(separator: ", ")))", "choose one with --server")
        case let .notSignedIn(server):
            return classified(.notRegistered, "there is no stored sign-in" + (server.map { " with \($0)" } ?? ""), "run `devtrust login`")
        case let .ambiguousSignIn(names):
            return classified(.usage, "there are several stored sign-ins (\(names.joined(separator: ", ")))", "choose one with --server or --discovery")
        case let .refreshRefused(reason):
            return classified(.serverRefused, "the server refused to refresh the sign-in (\(reason))",
                              "the stored tokens were deleted: run `devtrust login` again")
        case let .refreshFailed(place, reason, mayPass):
            // An outage or a proxy's answer may pass: a network failure; anything else, the server's refusal.
            return classified(mayPass ? .network : .serverRefused, "the sign-in at \(place) could not be refreshed (\(reason))",
                              "it is kept" + (mayPass ? ": run the command again in a while (if it keeps failing, run `devtrust login` again)"
                                                 : ": check the sign-in's settings, or run `devtrust login` again"))
        case .keyChangedDuringRegistration:
            return classified(.failure, "the device key was replaced while the registration ran, so the server registered the old key",
                              "nothing was recorded: run `devtrust register` again")
        case let .tooManyRegistrations(limit):
            return classified(.failure, "this device keeps at most \(limit) registrations for one user, and you have that many",
                              "nothing was recorded: `devtrust status` lists them; `devtrust reset` forgets them")
        case let .keystoreFull(limit):
            return classified(.failure, "this keystore keeps at most \(limit) registrations, every user's together, and holds that many",
                              "nothing was recorded: `devtrust status` lists them; `devtrust reset` forgets a user's")
        case let .dpopKeyChanged(boundTo, deviceKey):
            return classified(.notRegistered, "the sign-in's tokens are DPoP-bound to the key \(boundTo), but the device key is now \(deviceKey)",
                              "run `devtrust login` again")
        case let .notDPoPBound(server):
            return classified(.notRegistered, "the sign-in at \(server) holds bearer tokens, not DPoP-bound ones",
                              "run `devtrust login --dpop` to sign in for DPoP-bound tokens")
        case let .tokenGoesElsewhere(destination, server):
            return classified(.notRegistered, "the request goes to \(destination), not to \(server) where this device is registered",
                              "a device token goes only to its own server")
        case let .registrationForOtherKey(registrationId, server):
            return classified(.notRegistered, "registration \(registrationId) with \(server) was made with a different key than the current one",
                              "run `devtrust register --server \(server)` again")
        }
    }
}
