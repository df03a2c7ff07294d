import DevtrustConfig
import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeys
import DevtrustSignIn
import DevtrustTerminal
import Glibc

/// The sign-in profiles' discovery documents as the native messaging host uses
/// them: what each said (its authorization endpoint and issuer) or that it
/// failed, kept in the cache directory (`browser-discovery.json`), and fetched
/// within one time budget per reply, as the browser waits for the answer.
///
/// `config` fetches what is older than its freshness (an hour; a failure, a
/// minute); `token` takes whatever the cache holds, of any age, and fetches
/// only what it has never seen, so a navigation costs no request once `config`
/// has run (the extension asks for it when it starts, and every minute).
package struct NativeHostDiscovery {
    package static let cacheFileName = "browser-discovery.json"
    /// The whole time one reply may spend on discovery documents.
    package static let budgetMilliseconds = 5_000
    /// What one connection may take of it.
    package static let connectTimeoutMilliseconds = 3_000
    package static let freshSeconds: Int64 = 3_600
    package static let failureFreshSeconds: Int64 = 60

    /// What a document said, or why it could not be used, and when it was fetched.
    package struct Entry: Equatable {
        package var fetched: Int64
        package var authorization: String?
        package var issuer: String?
        /// Why the fetch failed (nil when it answered).
        package var failure: String?
    }

    package enum Purpose {
        /// A `config` reply: entries past their freshness are fetched again.
        case config
        /// A `token` reply: any entry answers.
        case token
    }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    package let services: NativeHostServices
    /// The configuration's HTTP options, before a fetch's share of the budget shortens them.
    package let options: HTTPOptions
    package let purpose: Purpose
    package private(set) var entries: [String: Entry]
    private var changed = false
    /// Monotonic milliseconds when the budget runs out.
    private let deadline: Int64

    /// The documents still to fetch in this reply, each given an equal share of what is left
    /// of the budget, so that one server that does not answer leaves time for the others.
    private var unfetched: Set<String>

    /// - Parameter urls: the documents this reply may ask for (BrowserEndpoints.discoveryURLs).
    package init(services: NativeHostServices, configuration: Configuration, purpose: Purpose, urls: [String]) {
        self.services = services
        self.purpose = purpose
        options = services.httpOptions(configuration)
        let entries = urls.isEmpty ? [:] : services.cache?.read(Self.cacheFileName).flatMap(Self.decode) ?? [:]
        self.entries = entries
        let now = services.clock.secondsSinceEpoch()
        unfetched = Set(urls.filter { url in entries[url].map { !Self.answers($0, purpose: purpose, now: now) } ?? true })
        deadline = MonotonicClock.milliseconds() + Int64(Self.budgetMilliseconds)
    }

    private static func answers(_ entry: Entry, purpose: Purpose, now: Int64) -> Bool {
        purpose == .token || now - entry.fetched < (entry.failure == nil ? freshSeconds : failureFreshSeconds)
    }

    /// The document at `url`: from the cache when it answers, else fetched within its share of the budget.
    package mutating func discover(_ url: String) throws(Failure) -> AuthorizationServer {
        let now = services.clock.secondsSinceEpoch()
        if let entry = entries[url], Self.answers(entry, purpose: purpose, now: now) {
            return try Self.server(entry)
        }
        let share = (deadline - MonotonicClock.milliseconds()) / Int64(max(unfetched.count, 1))
        unfetched.remove(url)
        guard share >= 100 else {
            throw Failure(description: "not fetched: this reply's \(Self.budgetMilliseconds / 1000) s for discovery documents are spent")
        }
        var options = options
        options.connectTimeoutMilliseconds = min(options.connectTimeoutMilliseconds, Self.connectTimeoutMilliseconds, Int(share))
        options.totalTimeoutMilliseconds = min(options.totalTimeoutMilliseconds, Int(share))
        let entry: Entry
        do {
            let server = try AuthorizationServer.discover(url, http: services.httpClient(options))
            entry = Entry(fetched: now, authorization: server.authorization, issuer: server.issuer)
        } catch {
            entry = Entry(fetched: now, failure: ErrorReport.from(error).summary)
        }
        entries[url] = entry
        changed = true
        return try Self.server(entry)
    }

    /// Writes what was fetched to the cache (nothing when nothing was).
    package func save() {
        guard changed, let cache = services.cache else { return }
        cache.write(Self.cacheFileName, JSONWriter.bytes(Self.encode(entries)))
    }

    private static func server(_ entry: Entry) throws(Failure) -> AuthorizationServer {
        if let failure = entry.failure { throw Failure(description: failure) }
        return AuthorizationServer(issuer: entry.issuer, authorization: entry.authorization)
    }

    package static func encode(_ entries: [String: Entry]) -> JSONValue {
        var documents = JSONObject()
        for (url, entry) in entries.sorted(by: { $0.key < $1.key }) {
            var object: JSONObject = ["fetched": .integer(entry.fetched)]
            if let authorization = entry.authorization { object["authorization"] = .string(authorization) }
            if let issuer = entry.issuer { object["issuer"] = .string(issuer) }
            if let failure = entry.failure { object["failure"] = .string(failure) }
            documents[url] = .object(object)
        }
        return .object(["version": .integer(1), "documents": .object(documents)])
    }

    /// Nil for a file of another version or shape: it is fetched again.
    package static func decode(_ bytes: [UInt8]) -> [String: Entry]? {
        guard case let .object(file)? = try? JSONParser.parse(bytes), file["version"] == .integer(1),
              case let .object(documents)? = file["documents"] else { return nil }
        var entries = [String: Entry]()
        for (url, value) in documents.members {
            guard case let .object(object) = value, let fetched = object["fetched"]?.int64Value else { continue }
            entries[url] = Entry(fetched: fetched, authorization: object["authorization"]?.stringValue, issuer: object["issuer"]?.stringValue,
                                 failure: object["failure"]?.stringValue)
        }
        return entries
    }
}
