import DevtrustDevice
import DevtrustHTTP
import DevtrustKeystore

/// `clock.<origin>`: this machine's clock against each server it is registered
/// or signed in with, from one GET's `Date` header (server contract, section 2:
/// the server refuses device tokens more than 30 s in its future and drops
/// those older than 5 minutes, silently). The GET goes to an endpoint devtrust
/// uses (the flow endpoint, the token endpoint, the discovery document), which
/// answers whatever its status; an answer from a cache counts with its `Age`.
/// Nothing is recorded: the other commands measure from their POSTs' answers.
struct ClockDiagnosis {
    static let title = "clock against the server's"
    /// Each server gets this long at most, so that doctor ends in bounded time.
    static let timeoutMilliseconds = 5_000

    /// One server to ask: its origin (the check's id), what the keystore names, and the URL to GET.
    struct Server: Equatable {
        let origin: String
        let named: String
        let url: String
    }

    let http: any HTTPClient
    /// This machine's wall clock, seconds since the epoch with fractions.
    let now: () -> Double
    /// Whether devtrust's own tokens for a server are written in its time now (a recent measurement, `ClockMonitor`).
    let correctsTokens: (String) -> Bool

    /// The servers of the registrations, then of the sign-ins, one per origin.
    static func servers(of state: KeystoreState) -> [Server] {
        var servers = [Server]()
        func add(_ named: String, _ url: () throws -> String) {
            let origin = ClockSkew.origin(of: named)
            guard !servers.contains(where: { $0.origin == origin }) else { return }
            servers.append(Server(origin: origin, named: named, url: (try? url()) ?? named))
        }
        for registration in state.registrations {
            add(registration.server) { try ServerURL(registration.server).appending("/api/server/v1/flow/execute") }
        }
        for signIn in state.signIns {
            if let server = signIn.server {
                add(server) { try ServerURL(server).appending("/oauth2/token") }
            } else if let discovery = signIn.discovery {
                add(discovery) { discovery }
            }
        }
        return servers
    }

    /// The HTTP settings of every command (CA file, proxy exceptions), with timeouts no longer than `timeoutMilliseconds`.
    static func options(_ settings: HTTPClientSettings) -> HTTPOptions {
        var options = settings.options
        options.connectTimeoutMilliseconds = min(options.connectTimeoutMilliseconds, timeoutMilliseconds)
        options.totalTimeoutMilliseconds = min(options.totalTimeoutMilliseconds, timeoutMilliseconds)
        return options
    }

    func check(_ server: Server) -> DoctorCheck {
        let id = "clock." + server.origin
        let sent = now()
        let response: HTTPResponse
        do {
            response = try http.send(HTTPRequest(method: "GET", url: server.url, headers: [("Accept", "application/json")]))
        } catch {
            return DoctorCheck(id, Self.title, .warn, "\(server.named) did not answer, so its clock cannot be compared: \(error)",
                               fix: "check that this machine reaches \(server.origin) (network, proxy, --ca-file for a private CA), then run `devtrust doctor` again")
        }
        let received = now()
        guard let header = response.header("Date"), let date = HTTPDate.parse(header) else {
            return DoctorCheck(id, Self.title, .warn, "\(server.named) answered (\(response.statusSummary)) without a readable Date header: its clock cannot be compared",
                               fix: "nothing on this machine; the server should send Date (RFC 9110), as the server contract asks")
        }
        // A cache's answer carries the Date of when the server made it; Age says how long ago (RFC 9111).
        let age = response.header("Age").flatMap { Int64($0.trimmingSpaces) } ?? 0
        let skew = Int64(((sent + received) / 2 - (Double(date + age) + 0.5)).rounded())
        let difference = skew > 0 ? "\(skew) s ahead of" : "\(-skew) s behind"
        let fix = "set the clock right: `timedatectl set-ntp true` (NTP), then check `timedatectl status`"
        if ClockSkew.exceedsTolerance(skew) {
            let effect = skew > 0
                ? "the server refuses device tokens more than \(ClockSkew.toleratedAhead) s in its future"
                : "the server drops device tokens older than \(ClockSkew.toleratedBehind / 60) minutes"
            let consequence = correctsTokens(server.origin)
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
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
