import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore
import DevtrustURL

/// `clock.<origin>`: this machine's clock against each server it is registered
/// or signed in with, from one GET's `Date` header (server contract, section 2:
/// the server refuses device tokens more than 30 s in its future and drops
/// those older than 5 minutes, silently). The GET goes to an endpoint devtrust
/// uses (the flow endpoint, the token endpoint, the discovery document), which
/// answers whatever its status; an answer from a cache counts with its `Age`.
/// Nothing is recorded: the other commands measure from their POSTs' answers.
/// A server that cannot be reached is a warning; one that answers in a way
/// every command refuses (a certificate not trusted, a failed TLS handshake,
/// a URL devtrust cannot use) is a failure.
package struct ClockDiagnosis {
    package static let title = "clock against the server's"
    /// Each server gets this long at most (curl's own timeouts), so that doctor ends in bounded time.
    package static let timeoutMilliseconds = 5_000
    /// The longest RFC 9111 lets a cache hold an Age at (2^31 s): a larger one counts as this.
    package static let largestAge: Int64 = 2_147_483_648

    /// One server to ask: its origin without user or password (the check's id), what the keystore
    /// names it as (shown without user or password), the URL to GET, and what is wrong with the
    /// keystore's URL when no URL to GET can be made of it.
    package struct Server: Equatable {
        package let origin: String
        /// What the other commands key its clock records by (`Origin.text(of:)` of the URL as recorded):
        /// `origin` but for a URL with no origin, which is kept as written.
        package let recordOrigin: String
        package let named: String
        package let url: String?
        package let problem: String?
        /// A registration's (else a sign-in's): what the fix for a bad URL says.
        package let isRegistration: Bool
    }

    package let http: any HTTPClient
    /// This machine's wall clock, seconds since the epoch with fractions.
    package let now: () -> Double
    /// Whether devtrust's own tokens for a server are written in its time now (a recent measurement, `ServerClocks`).
    package let correctsTokens: (String) -> Bool

    /// The servers of the registrations, then of the sign-ins, one per origin.
    package static func servers(of state: KeystoreState) -> [Server] {
        var servers = [Server]()
        func add(_ named: String, registration: Bool, _ url: () throws -> String) {
            let origin = Origin.text(of: withoutUserInfo(named))
            guard !servers.contains(where: { $0.origin == origin }) else { return }
            let made = Result { try url() }
            var problem: String?
            if case let .failure(error) = made { problem = (error as? HTTPError).map { "\($0)" } ?? "\(error)" }
            servers.append(Server(origin: origin, recordOrigin: Origin.text(of: named), named: DoctorText.shown(named),
                                  url: try? made.get(), problem: problem, isRegistration: registration))
        }
        for registration in state.registrations {
            add(registration.server, registration: true) { try ServerURL(registration.server).appending("/api/server/v1/flow/execute") }
        }
        for signIn in state.signIns {
            if let server = signIn.server {
                add(server, registration: false) { try ServerURL(server).appending("/oauth2/token") }
            } else if let discovery = signIn.discovery {
                add(discovery, registration: false) { _ = try ServerURL(String(discovery.split(separator: "?").first ?? "")); return discovery }
            }
        }
        return servers
    }

    /// `url` without the user name and password of its authority.
    package static func withoutUserInfo(_ url: String) -> String {
        var reference = URLReference(url)
        guard let authority = reference.authority, let at = authority.lastIndex(of: "@") else { return url }
        reference.authority = String(authority[authority.index(after: at)...])
        return reference.text
    }

    /// The HTTP settings of every command (CA file, proxy exceptions), with timeouts no longer than `timeoutMilliseconds`.
    package static func options(_ settings: HTTPOptions) -> HTTPOptions {
        var options = settings
        options.connectTimeoutMilliseconds = min(options.connectTimeoutMilliseconds, timeoutMilliseconds)
        options.totalTimeoutMilliseconds = min(options.totalTimeoutMilliseconds, timeoutMilliseconds)
        return options
    }

    package static func id(_ server: Server) -> String { "clock." + server.origin }

    package func check(_ server: Server) -> DoctorCheck {
        let id = Self.id(server)
        guard let url = server.url else {
            let again = server.isRegistration ? "register again with the server's base URL (devtrust register --server URL)"
                : "sign in again with the server's URL (devtrust logout, then devtrust login)"
            return DoctorCheck(id, Self.title, .fail, "the keystore names the server \(server.named), which is not a URL devtrust can use (\(server.problem ?? "?")): every command for it fails",
                               fix: again)
        }
        let response: HTTPResponse
        do {
            response = try http.send(HTTPRequest(method: "GET", url: url, headers: [("Accept", "application/json")]))
        } catch {
            return Self.unanswered(id, server, error)
        }
        let received = now()
        guard let header = response.header("Date"), let date = HTTPDate.parse(header) else {
            return DoctorCheck(id, Self.title, .warn, "\(server.named) answered (\(response.statusSummary)) without a readable Date header: its clock cannot be compared",
                               fix: "nothing on this machine; the server should send Date (RFC 9110), as the server contract asks")
        }
        // A cache's answer carries the Date of when the server made it; Age says how long ago (RFC 9111).
        var age: Int64 = 0
        if let text = response.header("Age") {
            guard let seconds = Self.deltaSeconds(text) else {
                return DoctorCheck(id, Self.title, .warn,
                                   "\(server.named) answered with an Age header that is not a number of seconds (\"\(text)\"; RFC 9111 allows digits only): its clock cannot be compared",
                                   fix: "nothing on this machine; the server, or a cache in front of it, should send a valid Age header")
            }
            // No cache keeps an answer to devtrust's requests for days: such an Age says more about the cache than the clock.
            guard seconds <= ClockSkew.maximumCorrection else {
                return DoctorCheck(id, Self.title, .warn,
                                   "\(server.named) answered with an Age header of \(seconds) s, more than a day: a cache that old says nothing about the server's clock now, so it cannot be compared",
                                   fix: "nothing on this machine; the server, or a cache in front of it, should not serve answers that old")
            }
            age = seconds
        }
        // This machine's time when the answer came, as ClockWatchingHTTPClient takes it (a server stamps
        // Date when it answers). In floating point, then clamped: a Date and an Age far apart must not overflow.
        let difference = (received - (Double(date) + Double(age) + 0.5)).rounded()
        let skew = Int64(max(-1e15, min(1e15, difference)))
        return verdict(id, server, skew: skew)
    }

    /// RFC 9111 delta-seconds: digits only (optional whitespace around them); past 2^31, 2^31.
    package static func deltaSeconds(_ text: String) -> Int64? {
        let digits = text.trimmingSpaces
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(digits).map { min($0, largestAge) } ?? largestAge
    }

    private func verdict(_ id: String, _ server: Server, skew: Int64) -> DoctorCheck {
        let difference = skew > 0 ? "\(skew) s ahead of" : "\(-skew) s behind"
        let fix = "set the clock right: `timedatectl set-ntp true` (NTP), then check `timedatectl status`"
        if ClockSkew.exceedsTolerance(skew) {
            let effect = skew > 0
                ? "the server refuses device tokens more than \(ClockSkew.toleratedAhead) s in its future"
                : "the server drops device tokens older than \(ClockSkew.toleratedBehind / 60) minutes"
            let consequence = correctsTokens(server.recordOrigin)
                ? "; devtrust writes its own tokens for it in the server's time while its last measurement holds (an hour at most), but other software's are refused"
                : ", so sign-ins there go on without device data"
            return DoctorCheck(id, Self.title, .fail, "this machine's clock is \(difference) \(server.named)'s (its Date header): \(effect)\(consequence)",
                               fix: fix)
        }
        if abs(skew) > ClockSkew.correctionThreshold {
            return DoctorCheck(id, Self.title, .warn,
                               "this machine's clock is \(difference) \(server.named)'s (its Date header): within what the server accepts (\(ClockSkew.toleratedAhead) s ahead, \(ClockSkew.toleratedBehind / 60) minutes behind), but a clock kept by NTP is within a second",
                               fix: fix)
        }
        return DoctorCheck(id, Self.title, .pass, "this machine's clock agrees with \(server.named)'s (its Date header) to \(abs(skew)) s")
    }

    /// A GET without an answer to read: a server out of reach is a warning (it may be down for now);
    /// an answer every command refuses is a failure; without libcurl there is nothing to ask with.
    package static func unanswered(_ id: String, _ server: Server, _ error: any Error) -> DoctorCheck {
        let reach = "check that this machine reaches \(server.origin) (network, proxy), then run `devtrust doctor` again"
        guard let error = error as? HTTPError else {
            return DoctorCheck(id, title, .warn, "\(server.named) did not answer, so its clock cannot be compared: \(error)", fix: reach)
        }
        let caFix = "if the server's certificate comes from a private CA, give that CA's certificate: --ca-file FILE or DEVTRUST_CA_FILE=FILE"
        switch error {
        case .libraryUnavailable, .libraryTooOld:
            return DoctorCheck(id, title, .skip, "cannot ask \(server.named): \(error) (see library.libcurl)")
        case .invalidURL, .insecureURL:
            return DoctorCheck(id, title, .fail, "\(error): every command for it fails", fix: "register (or sign in) again with the server's https:// URL")
        case let .transport(_, failure, detail):
            switch failure {
            case .untrustedCertificate:
                return DoctorCheck(id, title, .fail, "the certificate of \(server.named) is not trusted (\(detail)): every command that talks to it fails", fix: caFix)
            case .caFile:
                return DoctorCheck(id, title, .fail, "the CA file cannot be used (\(detail)): every command that talks to \(server.named) fails",
                                   fix: "point --ca-file (or DEVTRUST_CA_FILE) at a PEM file of the CA certificates to trust, or leave it unset to trust the system's")
            case .tls, .plainHTTPAnswer:
                return DoctorCheck(id, title, .fail, "\(error): every command that talks to \(server.named) fails",
                                   fix: "check the server URL's scheme and port; " + caFix)
            case .resolve, .connect, .timeout, .noResponse, .other:
                return DoctorCheck(id, title, .warn, "\(server.named) did not answer, so its clock cannot be compared: \(error)", fix: reach)
            }
        case .interrupted:
            // Doctor's clients do not stop on signals (HTTPOptions.interruption is unset); said for completeness.
            return DoctorCheck(id, title, .skip, "the request to \(server.named) was interrupted: \(error)")
        case .responseTooLarge, .redirected:
            return DoctorCheck(id, title, .warn, "\(server.named) gave no answer whose Date can be read: \(error)",
                               fix: "check the server URL the keystore records (devtrust status)")
        }
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
