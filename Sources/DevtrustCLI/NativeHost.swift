import DevtrustConfig
import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeystore
import DevtrustSignIn

/// Who started the host, as the browser says on its command line: Chromium
/// passes the extension's origin (`chrome-extension://ID/`), Firefox the host
/// manifest's path and the add-on's ID.
enum NativeHostCaller: Equatable, CustomStringConvertible {
    case chromium(extensionID: String)
    case firefox(extensionID: String)

    /// - Returns: nil when the arguments are not a browser's.
    init?(arguments: [String]) {
        if arguments.count == 1, arguments[0].hasPrefix("chrome-extension://"), arguments[0].hasSuffix("/") {
            let id = arguments[0].dropFirst("chrome-extension://".count).dropLast()
            guard !id.isEmpty, !id.contains("/") else { return nil }
            self = .chromium(extensionID: String(id))
        } else if arguments.count == 2, arguments[0].hasPrefix("/"), arguments[0].hasSuffix(".json"), !arguments[1].isEmpty {
            self = .firefox(extensionID: arguments[1])
        } else {
            return nil
        }
    }

    /// Whether the words after `devtrust` are how a browser starts a host whose
    /// manifest names the devtrust binary itself: then they mean `native-host`.
    static func isBrowserLaunch(_ arguments: [String]) -> Bool {
        NativeHostCaller(arguments: arguments) != nil
    }

    func isAllowed(_ allowed: [BrowserExtensionID]) -> Bool {
        switch self {
        case let .chromium(id): allowed.contains(.chromium(id))
        case let .firefox(id): allowed.contains(.firefox(id))
        }
    }

    var description: String {
        switch self {
        case let .chromium(id): BrowserExtensionID.chromiumOrigin(id)
        case let .firefox(id): "Firefox add-on \(id)"
        }
    }
}

/// The native messaging host: answers `config` (the authorization endpoints
/// of the servers this device is registered with) and `token` (a fresh device
/// token for a navigation to one of them), for devtrust's extension only.
/// docs/browser.md describes the messages.
struct NativeHost {
    /// The `error` of an error reply.
    enum ErrorCode: String {
        case badRequest = "bad_request", notAllowed = "not_allowed", noKey = "no_key", notRegistered = "not_registered"
        case tpm, keystore, config, failed
    }

    /// An error reply, and whether the host goes on serving after it.
    struct Refusal: Error {
        let code: ErrorCode
        let message: String
        var endsSession = false
    }

    /// How long discovering a profile's endpoint may take: the browser waits for the answer.
    static let discoveryConnectTimeoutSeconds = 3
    static let discoveryRequestTimeoutSeconds = 5
    /// The longest `id` echoed back.
    static let maximumIDBytes = 256

    let context: CommandContext
    let caller: NativeHostCaller
    let channel: NativeMessagingChannel

    /// Serves messages until the browser closes stdin; the exit status: 0 then,
    /// 1 after input that ends the session (refused caller, bad frame, not JSON).
    func serve() -> ExitCode {
        while true {
            let body: [UInt8]
            switch channel.receive() {
            case .end:
                return .success
            case let .message(bytes):
                body = bytes
            case let .truncated(received):
                return end(Refusal(code: .badRequest, message: "the input ended inside a message (after \(received) bytes)"), id: nil)
            case let .tooLarge(length):
                return end(Refusal(code: .badRequest, message: "a message of \(length) bytes; the host reads at most \(NativeMessagingChannel.maximumIncomingBytes)"), id: nil)
            }
            var id: JSONValue?
            do throws(Refusal) {
                let request = try parse(body)
                id = try Self.id(of: request)
                let reply = try answer(request)
                guard channel.send(.object(Self.with(id, reply))) else { return .failure }
            } catch {
                if error.endsSession { return end(error, id: id) }
                log(error)
                guard channel.send(Self.reply(error, id: id)) else { return .failure }
            }
        }
    }

    /// The reply to a message after which the host stops.
    private func end(_ refusal: Refusal, id: JSONValue?) -> ExitCode {
        log(refusal)
        _ = channel.send(Self.reply(refusal, id: id))
        return .failure
    }

    private func log(_ refusal: Refusal) {
        context.warn("native-host: \(refusal.code.rawValue): \(refusal.message)")
    }

    private func parse(_ body: [UInt8]) throws(Refusal) -> JSONObject {
        let value: JSONValue
        do {
            value = try JSONParser.parse(body)
        } catch {
            throw Refusal(code: .badRequest, message: "the message is not JSON (\(error))", endsSession: true)
        }
        guard case let .object(request) = value else {
            throw Refusal(code: .badRequest, message: "the message is \(value.kindDescription), not an object", endsSession: true)
        }
        return request
    }

    /// The request's `id`, echoed in the reply: a string (at most 256 bytes) or a number.
    private static func id(of request: JSONObject) throws(Refusal) -> JSONValue? {
        switch request["id"] {
        case nil: return nil
        case let .string(text)? where text.utf8.count <= maximumIDBytes: return .string(text)
        case let .number(number)? where number.utf8.count <= maximumIDBytes: return .number(number)
        default: throw Refusal(code: .badRequest, message: "id must be a string of at most \(maximumIDBytes) bytes, or a number")
        }
    }

    private func answer(_ request: JSONObject) throws(Refusal) -> JSONObject {
        // A configuration that cannot be used leaves devtrust's own extension to be answered (with the error).
        let loaded: Result<Configuration, ConfigError>
        do {
            loaded = .success(try context.configuration())
        } catch {
            loaded = .failure(error)
        }
        let extraIDs = (try? loaded.get())?.browserExtensionIDs ?? []
        guard caller.isAllowed(BrowserExtensionID.devtrust + extraIDs) else {
            throw Refusal(code: .notAllowed, message: "this host answers only devtrust's browser extension and the extension IDs of the configuration (browser.extensionIds), not \(caller)", endsSession: true)
        }
        let configuration: Configuration
        switch loaded {
        case let .success(loaded): configuration = loaded
        case let .failure(error): throw Refusal(code: .config, message: error.description)
        }
        switch request["type"] {
        case .string("config")?:
            return try config(configuration)
        case .string("token")?:
            guard case let .string(url)? = request["url"] else {
                throw Refusal(code: .badRequest, message: "a token request needs \"url\": the authorization URL navigated to")
            }
            return try token(for: url, configuration: configuration)
        case let .string(type)?:
            throw Refusal(code: .badRequest, message: "unknown request type \"\(TerminalText.printable(String(type.prefix(64))))\" (the host answers config and token)")
        default:
            throw Refusal(code: .badRequest, message: "a request needs \"type\": \"config\" or \"token\"")
        }
    }

    private func config(_ configuration: Configuration) throws(Refusal) -> JSONObject {
        let state = try keystoreState()
        var endpoints = BrowserEndpoints.registered(state)
        addProfiles(to: &endpoints, configuration, state: state)
        return ["type": .string("config"), "version": .integer(1),
                "authorizationEndpoints": .array(endpoints.endpoints.map { .string($0.description) }),
                "revision": .string(endpoints.revision)]
    }

    private func token(for url: String, configuration: Configuration) throws(Refusal) -> JSONObject {
        let store: DeviceStore
        let state: KeystoreState
        do {
            store = try context.deviceStore()
            state = try store.state()
        } catch {
            throw Self.refusal(error)
        }
        guard state.key != nil else {
            throw Self.refusal(DeviceError.noDeviceKey(keystore: store.keystore.path))
        }
        guard !BrowserEndpoints.currentRegistrations(state).isEmpty else {
            throw Refusal(code: .notRegistered, message: "this device is not registered with any server; run `devtrust register --server URL`")
        }
        let endpoint: AuthorizationEndpoint
        do {
            endpoint = try AuthorizationEndpoint(navigation: url)
        } catch {
            throw Refusal(code: .notAllowed, message: "no device token for this URL: \(error)")
        }
        if Self.carriesDeviceToken(url) {
            throw Refusal(code: .notAllowed, message: "no device token for \(endpoint): the URL carries a device_token already, and a sign-in gets one only")
        }
        var endpoints = BrowserEndpoints.registered(state)
        // Discovery only for a URL the registrations do not explain.
        if endpoints.entry(for: endpoint) == nil { addProfiles(to: &endpoints, configuration, state: state) }
        guard let entry = endpoints.entry(for: endpoint) else {
            throw Refusal(code: .notAllowed, message: "no device token for \(endpoint): it is not the authorization endpoint of a server this device is registered with")
        }
        do {
            let device = try store.loadKey()
            guard device.record.fingerprint == entry.registration.keyFingerprint else {
                throw DeviceError.registrationForOtherKey(registrationId: entry.registration.registrationId, server: entry.registration.server)
            }
            let attributes = DeviceAttributesForKey(configuration: configuration).attributes(context, backend: device.record.backend)
            let clock = context.clocks.clock(for: entry.registration.server, base: context.environment.clock)
            let token = try DeviceTokenMinter(key: device.key, clock: clock, random: context.environment.random)
                .deviceToken(deviceId: entry.registration.registrationId, attributes: attributes)
            return ["type": .string("token"), "token": .string(token)]
        } catch {
            throw Self.refusal(error)
        }
    }

    /// Whether the query has a `device_token` parameter, its name percent-encoded or not.
    static func carriesDeviceToken(_ url: String) -> Bool {
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        return parts[1].split(separator: "&").contains { pair in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            return (FormEncoding.unescape(name) ?? String(name)) == "device_token"
        }
    }

    private func keystoreState() throws(Refusal) -> KeystoreState {
        do {
            return try context.deviceStore().state()
        } catch {
            throw Self.refusal(error)
        }
    }

    private func addProfiles(to endpoints: inout BrowserEndpoints, _ configuration: Configuration, state: KeystoreState) {
        var http = configuration.http
        http.connectTimeoutSeconds = min(http.connectTimeoutSeconds, Self.discoveryConnectTimeoutSeconds)
        http.requestTimeoutSeconds = min(http.requestTimeoutSeconds, Self.discoveryRequestTimeoutSeconds)
        let settings = HTTPClientSettings(caFile: context.global.caFile, http: http, environment: context.environment.variables)
        let context = self.context
        endpoints.addProfiles(configuration, state: state,
                              discover: { try AuthorizationServer.discover($0, http: settings.client(context)) },
                              note: { context.warn("native-host: \($0)") })
    }

    /// The error reply for what loading or using the key threw, by its exit code.
    static func refusal(_ error: any Error) -> Refusal {
        let report = ErrorReport.from(error)
        let code: ErrorCode
        switch (error, report.exitCode) {
        case (DeviceError.noDeviceKey, _): code = .noKey
        case (_, .noKeyOrNotRegistered): code = .notRegistered
        case (_, .tpm): code = .tpm
        case (_, .keystore): code = .keystore
        case (is ConfigError, _): code = .config
        default: code = .failed
        }
        return Refusal(code: code, message: report.message)
    }

    static func reply(_ refusal: Refusal, id: JSONValue?) -> JSONValue {
        .object(with(id, ["type": .string("error"), "error": .string(refusal.code.rawValue), "message": .string(refusal.message)]))
    }

    private static func with(_ id: JSONValue?, _ reply: JSONObject) -> JSONObject {
        var reply = reply
        if let id { reply["id"] = id }
        return reply
    }
}
