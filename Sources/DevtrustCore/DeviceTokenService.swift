import DevtrustConfig
import DevtrustDevice
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustPosture

/// Device tokens and device data for this device, as every front end mints them (`token`,
/// `device-data`, `register`'s Device Registration step, `login`'s and `authorize-url`'s device
/// token, the browser's native messaging host): the key loaded from the keystore, the registration
/// chosen by the one rule (`RegistrationSelector`), the attributes gathered (`DeviceAttributesForKey`:
/// posture with its cache and the admin's collector, the configuration's claims, `--claim`), the
/// clock corrected for the registration's server (`ServerClocks`), the signature under a deadline
/// (`SigningDeadline`). Everything it uses is given to it; what a front end prints stays its own
/// (`steps`, the `SignInDeviceToken` outcome, `warn`).
public struct DeviceTokenService {
    /// The keystore and the TPM its key is used in.
    public let store: DeviceStore
    let configuration: Configuration
    /// This machine's clock (`iat`, the posture cache), before any server's correction.
    let clock: any Clock
    let random: any RandomSource
    let serverClocks: ServerClocks
    let postureSources: PostureSources
    /// Where warnings go (a failing admin collector): said, never fatal.
    let warn: (String) -> Void

    public init(store: DeviceStore, configuration: Configuration, clock: any Clock, random: any RandomSource,
                serverClocks: ServerClocks, posture: PostureSources, warn: @escaping (String) -> Void) {
        self.store = store
        self.configuration = configuration
        self.clock = clock
        self.random = random
        self.serverClocks = serverClocks
        self.postureSources = posture
        self.warn = warn
    }

    /// What a mint did, in order, for a front end that says each step (`token -v`).
    public enum Step {
        /// The key is loaded and the registration chosen (from the keystore read with the key).
        case registrationChosen(LoadedDevice, SelectedRegistration)
        /// The attributes are gathered; where each claim comes from, one line each.
        case attributesGathered(claimSources: [String])
        /// The token is about to be signed.
        case signing
    }

    /// A device token for the registration `choice` names: loading the key, choosing, gathering and
    /// signing all under `deadline` (none: unbounded). `addedClaims` come last (`--claim`).
    public func deviceToken(for choice: RegistrationChoice, addedClaims: [(String, String)] = [], deadline: SigningDeadline? = nil,
                            steps: ((Step) -> Void)? = nil) throws -> String {
        try mintedDeviceToken(for: choice, addedClaims: addedClaims, deadline: deadline, steps: steps).token
    }

    /// The same, with its `jti` (the system agent's audit names it).
    public func mintedDeviceToken(for choice: RegistrationChoice, addedClaims: [(String, String)] = [], deadline: SigningDeadline? = nil,
                                  steps: ((Step) -> Void)? = nil) throws -> MintedJWT {
        try Self.bounded(by: deadline) {
            // One read of the keystore for the key and the registrations: this is the per-request path.
            let device = try store.loadKey()
            let selected = try RegistrationSelector.select(from: device.state, choice)
            steps?(.registrationChosen(device, selected))
            let attributes = try gatherAttributes(backend: device.record.backend, addedClaims: addedClaims, steps: steps)
            // In the server's time when its clock was measured to differ (ClockSkew says when that still holds).
            let clock = selected.registration.map { serverClocks.clock(for: $0.server, base: self.clock) } ?? self.clock
            steps?(.signing)
            return try DeviceTokenMinter(key: device.key, clock: clock, random: random)
                .mintedDeviceToken(deviceId: selected.deviceID, attributes: attributes)
        }
    }

    /// A deviceData JWT: no registration, so this machine's time.
    public func deviceData(addedClaims: [(String, String)] = [], deadline: SigningDeadline? = nil) throws -> String {
        try mintedDeviceData(addedClaims: addedClaims, deadline: deadline).token
    }

    /// The same, with its `jti`.
    public func mintedDeviceData(addedClaims: [(String, String)] = [], deadline: SigningDeadline? = nil) throws -> MintedJWT {
        try Self.bounded(by: deadline) {
            let device = try store.loadKey()
            let attributes = try gatherAttributes(backend: device.record.backend, addedClaims: addedClaims, steps: nil)
            return try DeviceTokenMinter(key: device.key, clock: clock, random: random).mintedDeviceData(attributes: attributes)
        }
    }

    /// A sign-in's device token, or why the sign-in goes without one.
    public enum SignInDeviceToken: Equatable {
        case token(MintedJWT)
        /// No key (`noDeviceKey`), no registration there (`notRegistered`, `ambiguousRegistration`,
        /// `registrationForOtherKey`), or one whose token would go to another origin (`tokenGoesElsewhere`).
        case withoutToken(because: DeviceError)
    }

    /// The device token a sign-in carries (`login`, `authorize-url`): for the registration `choice`
    /// names (nil: nothing names one), when every URL it goes to (`destinations`) is on that
    /// registration's origin. Without a key or such a registration the sign-in goes on without a
    /// token, and the front end says why; that is decided from the keystore before the key is loaded.
    public func signInDeviceToken(for choice: RegistrationChoice?, sendingTo destinations: [String]) throws -> SignInDeviceToken {
        let state = try store.state()
        guard state.key != nil else { return .withoutToken(because: .noDeviceKey(keystore: store.keystore.path)) }
        let registration: RegistrationRecord
        do {
            guard let choice else { throw DeviceError.notRegistered(server: nil) }
            guard let selected = try RegistrationSelector.select(from: state, choice, sendingTo: destinations).registration else {
                throw DeviceError.notRegistered(server: nil)
            }
            registration = selected
        } catch let error as DeviceError {
            return .withoutToken(because: error)
        }
        return .token(try mintedDeviceToken(for: .chosen(registration)))
    }

    /// The posture for a key kept by `backend` (nil: no key); problems are warned of, never fatal.
    public func posture(backend: KeyBackend?) -> PostureReport {
        let report = postureSources.collect(backend: backend, configuration: configuration, now: clock.secondsSinceEpoch())
        for problem in report.problems { warn(problem) }
        return report
    }

    /// The attributes and where each comes from, with `addedClaims` last.
    public func attributes(addedClaims: [(String, String)] = []) -> DeviceAttributesForKey {
        DeviceAttributesForKey(configuration: configuration, addedClaims: addedClaims)
    }

    /// The minter of the deviceData a registration's Device Registration step carries: in
    /// `server`'s time once its answers have told it.
    public func registrationMinter(key: any DeviceKey, server: String) -> DeviceTokenMinter {
        DeviceTokenMinter(key: key, clock: serverClocks.clock(for: server, base: clock), random: random)
    }

    /// The attributes a device token or a registration's deviceData carries for a key kept by
    /// `backend`: the configuration's, the posture's, then `addedClaims`, which only add names (a
    /// measured or reserved one is refused). `claimSources` hears where each claim comes from, one
    /// line each (worked out only for a front end that says them).
    public func gatheredAttributes(backend: KeyBackend, addedClaims: [(String, String)] = [],
                                   claimSources: (([String]) -> Void)? = nil) throws -> DeviceAttributes {
        let sources = attributes(addedClaims: addedClaims)
        let report = posture(backend: backend)
        if let claimSources { claimSources(sources.sources(posture: report)) }
        return try sources.attributes(posture: report)
    }

    private func gatherAttributes(backend: KeyBackend, addedClaims: [(String, String)], steps: ((Step) -> Void)?) throws -> DeviceAttributes {
        // The default path does no more than mint.
        try gatheredAttributes(backend: backend, addedClaims: addedClaims,
                           claimSources: steps.map { steps in { steps(.attributesGathered(claimSources: $0)) } })
    }

    private static func bounded<Result>(by deadline: SigningDeadline?, _ body: () throws -> Result) throws -> Result {
        guard let deadline else { return try body() }
        return try deadline.bounding(body)
    }
}
