import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore

/// Where the native host's device tokens come from: the device key of a keystore (the core's
/// device-token service over it), or the system agent, which mints them with the machine key for
/// the user's own registrations (the front end's `NativeHostDevice(state:noKey:deviceToken:)`).
package struct NativeHostDevice {
    /// The key and the registrations a token may be for, as they are now.
    package var state: () throws -> KeystoreState
    /// The same, or as a recent `state` found them (`remembered`: the system agent's, kept between
    /// messages so that a token costs the agent one request; `RememberedState`). A token request
    /// that a remembered state cannot serve asks `state` again.
    package var recentState: () throws -> (state: KeystoreState, remembered: Bool)
    /// The error that there is no key (where it should be).
    package var noKey: () -> any Error
    /// A device token for `registration`, one of `state`'s, signed within the deadline.
    package var deviceToken: (_ registration: RegistrationRecord, _ deadline: SigningDeadline) throws -> String

    /// `recentState`: nil for `state` itself, never remembered.
    package init(state: @escaping () throws -> KeystoreState, recentState: (() throws -> (state: KeystoreState, remembered: Bool))? = nil,
                 noKey: @escaping () -> any Error,
                 deviceToken: @escaping (_ registration: RegistrationRecord, _ deadline: SigningDeadline) throws -> String) {
        self.state = state
        self.recentState = recentState ?? { (try state(), false) }
        self.noKey = noKey
        self.deviceToken = deviceToken
    }

    /// The device key of `tokens`' keystore: the registration checked against the key then loaded.
    package init(_ tokens: DeviceTokenService) {
        self.init(state: { try tokens.store.state() }, noKey: { DeviceError.noDeviceKey(keystore: tokens.store.keystore.path) },
                  deviceToken: { registration, deadline in try tokens.deviceToken(for: .chosen(registration), deadline: deadline) })
    }
}

/// What the native messaging host takes from the front end that runs it (the command line's
/// `native-host` today): the configuration, read again for every message so that an
/// administrator's change applies to the next one; the device (`NativeHostDevice`: a keystore's
/// key or the system agent's), with a message's configuration; HTTP for the sign-in profiles'
/// discovery documents; the cache directory and the clock; where its log lines go (stderr, which
/// the browser keeps as the host's log).
package struct NativeHostServices {
    package var configuration: () throws(ConfigError) -> Configuration
    package var device: (Configuration) throws -> NativeHostDevice
    /// The HTTP options of a configuration (CA file, timeouts, proxy), before the host shortens them.
    package var httpOptions: (Configuration) -> HTTPOptions
    /// A client with those options (measuring the servers' clocks, as every client of the front end does).
    package var httpClient: (HTTPOptions) -> any HTTPClient
    /// Where discovery documents are kept between messages and between hosts (nil: not kept).
    package var cache: CacheDirectory?
    package var clock: any Clock
    package var log: (String) -> Void
    /// The process's exit status when a signing deadline passes, after its reply (`SigningDeadline.nativeHost`).
    package var deadlineExitStatus: Int32

    package init(configuration: @escaping () throws(ConfigError) -> Configuration, device: @escaping (Configuration) throws -> NativeHostDevice,
                 httpOptions: @escaping (Configuration) -> HTTPOptions, httpClient: @escaping (HTTPOptions) -> any HTTPClient,
                 cache: CacheDirectory?, clock: any Clock, log: @escaping (String) -> Void, deadlineExitStatus: Int32) {
        self.configuration = configuration
        self.device = device
        self.httpOptions = httpOptions
        self.httpClient = httpClient
        self.cache = cache
        self.clock = clock
        self.log = log
        self.deadlineExitStatus = deadlineExitStatus
    }
}

/// What a native host remembers between its messages of what the system agent said (the device's
/// state: the machine key and the caller's registrations), so that a token costs the agent one
/// request, not two. Kept at most `lifetimeMilliseconds` of the monotonic clock after the agent said
/// it, and forgotten when a token request fails; the agent itself decides, for every token, that the
/// registration is still the caller's (a remembered one that is not is refused, and asked again).
package final class RememberedState<Value>: @unchecked Sendable {
    /// As long as the agent keeps a user's account and groups (AgentUsers.keptMilliseconds).
    package static var lifetimeMilliseconds: Int64 { 30_000 }

    private var kept: (value: Value, at: Int64)?
    private let lifetime: Int64
    private let now: () -> Int64

    /// `now`: milliseconds of a clock that does not go back (the monotonic clock).
    package init(lifetimeMilliseconds: Int64 = RememberedState.lifetimeMilliseconds, now: @escaping () -> Int64 = MonotonicClock.milliseconds) {
        lifetime = lifetimeMilliseconds
        self.now = now
    }

    /// What `fetch` says now, kept.
    package func fresh(_ fetch: () throws -> Value) rethrows -> Value {
        kept = nil
        let value = try fetch()
        kept = (value, now())
        return value
    }

    /// What was kept, when it is recent enough; else what `fetch` says now, kept.
    package func recent(_ fetch: () throws -> Value) rethrows -> (value: Value, remembered: Bool) {
        if let kept, now() - kept.at < lifetime { return (kept.value, true) }
        return (try fresh(fetch), false)
    }

    package func forget() {
        kept = nil
    }
}
