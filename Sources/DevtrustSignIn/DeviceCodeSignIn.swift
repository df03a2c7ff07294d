import Glibc
import DevtrustErrors
import DevtrustHTTP
import DevtrustKeystore

/// What happens during a sign-in that polls the token endpoint (device code, CIBA),
/// for the terminal or `--json`. `Started` is what the user is shown first; it
/// carries no secret that the caller could print by mistake, or says which is one.
public enum PollingSignInEvent<Started: Sendable>: Sendable {
    case started(Started, interval: Int64)
    /// About to wait `wait` seconds (the interval, or longer after a failure), then poll for the
    /// `pollCount`-th time at `nextPollAt` (epoch seconds, for display only).
    case polling(pollCount: Int, interval: Int64, wait: Int64, nextPollAt: Double)
    case slowDown(newInterval: Int64)
    /// The poll did not reach the server, or the server failed (5xx, 429): polling goes on in `retryIn` seconds.
    case networkError(String, retryIn: Int64)
}

/// What happens during a device-code sign-in.
public typealias DeviceCodeEvent = PollingSignInEvent<DeviceAuthorization>

/// The device code ended without tokens: the server refused (expired or denied).
public enum DeviceCodeFailure: Error, Equatable, Sendable, CustomStringConvertible {
    case expired
    case denied

    public var description: String {
        switch self {
        case .expired: return "the code expired before it was approved; run the command again"
        case .denied: return "the sign-in was denied (access_denied)"
        }
    }
}

extension DeviceCodeFailure: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(self == .expired ? .approvalExpired : .approvalDenied, summary: description)
    }
}

/// Which sign-in a polling run is: what a message about it calls things.
public enum PolledGrant: Sendable, Equatable {
    case deviceCode
    case ciba
}

/// A signal (Ctrl-C, SIGTERM, SIGHUP) ended the wait: the caller says so, then ends by it.
public struct Interrupted: Error, Equatable, Sendable, CustomStringConvertible {
    public let signal: Int32
    /// While the server was asked for the grant (a code, a CIBA request), before there was one.
    public let whileRequesting: Bool
    public let grant: PolledGrant

    public init(signal: Int32, whileRequesting: Bool = false, grant: PolledGrant = .deviceCode) {
        self.signal = signal
        self.whileRequesting = whileRequesting
        self.grant = grant
    }

    public var description: String {
        let by = "interrupted by \(Self.name(of: signal))"
        switch (grant, whileRequesting) {
        case (.deviceCode, true): return "\(by) while asking the server for a code; nothing was stored"
        case (.deviceCode, false): return "\(by) while waiting for approval; the code was not used"
        // The server may have taken the request: it asks the user all the same, and approving it then signs nothing in.
        case (.ciba, true): return "\(by) while sending the sign-in request; nothing was stored (if the server took it, "
            + "the user's device may still ask for approval until it expires: approving it signs nothing in)"
        case (.ciba, false): return "\(by) while waiting for approval; nothing was stored, and the request stays pending "
            + "on the user's device until it expires (approving it now signs nothing in)"
        }
    }

    /// "SIGINT", "SIGTERM", "SIGHUP", or "signal N".
    public static func name(of signal: Int32) -> String {
        [SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP"][signal] ?? "signal \(signal)"
    }
}

extension Interrupted: ClassifiedError {
    public var classification: ErrorClassification { ErrorClassification(.interrupted(signal: signal), summary: description) }
}

/// Time and waiting; injected so that tests of the polling rules need no real time.
public protocol Waiting: Sendable {
    /// Seconds, with fractions, on a clock that nobody can set (any origin):
    /// the deadline and every wait are measured on it, so that a change of the
    /// system time neither ends the sign-in early nor stretches it.
    func now() -> Double
    /// Seconds since the epoch, only to show when something happens (`next_poll_at`).
    func wallClock() -> Double
    /// Waits until `deadline` (on the `now()` clock), calling `tick` with `now()` about once a second.
    /// Throws `Interrupted` when a signal ends the wait.
    func wait(until deadline: Double, tick: (Double) -> Void) throws
}

/// RFC 8628 device authorization grant: asks for a code, then polls by `PollingLoop`'s rules.
/// The device code is never shown.
public struct DeviceCodeSignIn {
    public let polling: PolledSignIn
    public let scope: String

    public init(oauth: OAuthClient, clientID: String, scope: String, server: AuthorizationServer, waiting: any Waiting) {
        polling = PolledSignIn(oauth: oauth, clientID: clientID, server: server, waiting: waiting)
        self.scope = scope
    }


    public func run(events: (DeviceCodeEvent) -> Void, tick: (Double, Double) -> Void = { _, _ in }) throws -> TokenSet {
        try polling.run(.deviceCode, request: { try $0.oauth.authorizeDevice(clientID: $0.clientID, scope: scope, server: $0.server) },
                        started: { $0 }, schedule: { ($0.expiresIn, $0.interval) },
                        expired: DeviceCodeFailure.expired, denied: DeviceCodeFailure.denied,
                        poll: { try $0.oauth.pollDevice($1, clientID: $0.clientID, server: $0.server) }, events: events, tick: tick)
    }
}

/// What a sign-in the user approves elsewhere (device code, CIBA) asks with: the client,
/// the server and the clock to wait on; and the run they share.
public struct PolledSignIn: Sendable {
    public let oauth: OAuthClient
    public let clientID: String
    public let server: AuthorizationServer
    public let waiting: any Waiting

    public init(oauth: OAuthClient, clientID: String, server: AuthorizationServer, waiting: any Waiting) {
        self.oauth = oauth
        self.clientID = clientID
        self.server = server
        self.waiting = waiting
    }

    /// Asks the server for the grant (`request`), then polls for it by `PollingLoop`'s rules;
    /// a signal during either ends it as `Interrupted`, said in the words of `grant`.
    /// - Parameters:
    ///   - started: what the first event shows, from the grant; `schedule`: its `expires_in` and `interval`.
    func run<Grant, Started>(_ grant: PolledGrant, request: (Self) throws -> Grant, started: (Grant) -> Started,
                             schedule: (Grant) -> (expiresIn: Int64, interval: Int64?), expired: any Error, denied: any Error,
                             poll: (Self, Grant) throws -> DevicePollResult, events: (PollingSignInEvent<Started>) -> Void,
                             tick: (Double, Double) -> Void) throws -> TokenSet {
        let granted: Grant
        do {
            granted = try request(self)
        } catch let HTTPError.interrupted(_, signal) {
            throw Interrupted(signal: signal, whileRequesting: true, grant: grant)
        }
        let (expiresIn, interval) = schedule(granted)
        do {
            return try PollingLoop(waiting: waiting).run(started: started(granted), expiresIn: expiresIn, interval: interval, expired: expired,
                                                         denied: denied, poll: { try poll(self, granted) }, events: events, tick: tick)
        } catch let interrupted as Interrupted {
            throw Interrupted(signal: interrupted.signal, grant: grant)
        }
    }
}

/// Polling a token endpoint until the user approves elsewhere, by the rules of
/// RFC 8628 section 3.5, which CIBA's poll mode (OpenID CIBA Core 7.3) shares:
/// wait `interval` (5 s when absent) between polls; `slow_down` adds 5 s to
/// this and every later interval; `authorization_pending` keeps polling;
/// `access_denied` and `expired_token` end it; stop at `expires_in` even when
/// the server never says so (measured on a monotonic clock); network errors and
/// server failures (5xx, with or without a JSON error) back off and polling goes
/// on within the deadline.
public struct PollingLoop {
    public static let defaultInterval: Int64 = 5
    public static let maximumBackoff: Int64 = 60

    public let waiting: any Waiting

    public init(waiting: any Waiting) {
        self.waiting = waiting
    }

    /// The wait before the next poll after a network error or a server failure,
    /// `previous` being the wait after the one before (0 for the first in a row):
    /// the interval, doubled for each further one, never shorter than the
    /// interval; at most 60 s, unless the interval itself is longer, when the
    /// doubling goes on (the deadline bounds it).
    public static func backoff(after previous: Int64, interval: Int64) -> Int64 {
        let doubled = previous > 0 ? min(previous, Int64(1) << 40) * 2 : interval
        let grown = max(doubled, interval)
        return interval > maximumBackoff ? grown : min(grown, maximumBackoff)
    }

    /// - Parameters:
    ///   - started: what the first event shows; `expiresIn` and `interval` are the server's (interval nil: 5 s).
    ///   - expired, denied: thrown when the grant expires (or the deadline passes) or is denied.
    ///   - poll: one request to the token endpoint.
    public func run<Started>(started: Started, expiresIn: Int64, interval serverInterval: Int64?, expired: any Error, denied: any Error,
                             poll: () throws -> DevicePollResult, events: (PollingSignInEvent<Started>) -> Void,
                             tick: (Double, Double) -> Void) throws -> TokenSet {
        var interval = serverInterval ?? Self.defaultInterval
        // Monotonic: a wall clock set forward would end the sign-in at once, one set back would poll past the grant's life.
        let deadline = waiting.now() + Double(expiresIn)
        events(.started(started, interval: interval))
        var backoff: Int64 = 0
        var polls = 0
        while true {
            let wait = backoff > 0 ? backoff : interval
            let nextPoll = waiting.now() + Double(wait)
            guard nextPoll < deadline else {
                // The server's own expiry: no poll could come back with tokens now.
                try waiting.wait(until: deadline) { tick($0, deadline) }
                throw expired
            }
            polls += 1
            events(.polling(pollCount: polls, interval: interval, wait: wait, nextPollAt: waiting.wallClock() + Double(wait)))
            try waiting.wait(until: nextPoll) { tick($0, deadline) }
            let result: DevicePollResult
            do {
                result = try poll()
            } catch let error as HTTPError {
                if case let .interrupted(_, signal) = error { throw Interrupted(signal: signal) }
                guard case .transport = error else { throw error }
                backoff = Self.backoff(after: backoff, interval: interval)
                events(.networkError("\(error)", retryIn: backoff))
                continue
            } catch let error as OAuthProtocolError where error.mayPass {
                backoff = Self.backoff(after: backoff, interval: interval)
                events(.networkError("\(error)", retryIn: backoff))
                continue
            }
            if case let .unavailable(message) = result {
                backoff = Self.backoff(after: backoff, interval: interval)
                events(.networkError(message, retryIn: backoff))
                continue
            }
            backoff = 0
            switch result {
            case let .tokens(tokens): return tokens
            case .pending, .unavailable: continue
            case .slowDown:
                interval += 5
                events(.slowDown(newInterval: interval))
            case .denied: throw denied
            case .expired: throw expired
            }
        }
    }
}

/// Real time: CLOCK_BOOTTIME for deadlines and waits (monotonic, and it counts
/// the time the machine was suspended, as the server's expiry does), CLOCK_REALTIME
/// only for the times shown.
public struct SystemWaiting: Waiting {
    /// The signal that arrived, if one did (0 for none).
    public let interruption: @Sendable () -> Int32

    public init(interruption: @escaping @Sendable () -> Int32 = { 0 }) {
        self.interruption = interruption
    }

    public func now() -> Double { Self.read(CLOCK_BOOTTIME) }

    public func wallClock() -> Double { Self.read(CLOCK_REALTIME) }

    static func read(_ clock: clockid_t) -> Double {
        var time = timespec()
        clock_gettime(clock, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    public func wait(until deadline: Double, tick: (Double) -> Void) throws {
        while true {
            let signal = interruption()
            if signal != 0 { throw Interrupted(signal: signal) }
            let remaining = deadline - now()
            if remaining <= 0 { return }
            tick(now())
            var slice = timespec(tv_sec: 0, tv_nsec: Int(min(remaining, 1.0) * 1e9))
            if remaining >= 1 { slice = timespec(tv_sec: 1, tv_nsec: 0) }
            nanosleep(&slice, nil)
        }
    }
}
