import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustKeystore
import DevtrustSignIn
import DevtrustSystem
import DevtrustTerminal

/// Who started the host, as the browser says on its command line: Chromium
/// passes the extension's origin (`chrome-extension://ID/`), Firefox the host
/// manifest's path and the add-on's ID.
package enum NativeHostCaller: Equatable, CustomStringConvertible {
    case chromium(extensionID: String)
    case firefox(extensionID: String)

    /// - Returns: nil when the arguments are not exactly what a browser passes: Chromium
    ///   `chrome-extension://ID/` (an ID of 32 letters a to p), possibly followed by
    ///   `--parent-window=N`; Firefox the absolute path of an existing host manifest for
    ///   devtrust's host (`dev.devtrust.host`) and an add-on ID of Firefox's shape.
    package init?(arguments: [String]) {
        let origin = "chrome-extension://"
        if (arguments.count == 1 || arguments.count == 2 && Self.isParentWindow(arguments[1])),
           arguments[0].hasPrefix(origin), arguments[0].hasSuffix("/") {
            let id = String(arguments[0].dropFirst(origin.count).dropLast())
            guard case .chromium? = BrowserExtensionID(id) else { return nil }
            self = .chromium(extensionID: id)
        } else if Self.isFirefoxShaped(arguments), Self.manifestProblem(arguments[0]) == nil {
            self = .firefox(extensionID: arguments[1])
        } else {
            return nil
        }
    }

    /// What Chromium adds on some platforms: the window that asked, as a number.
    private static func isParentWindow(_ argument: String) -> Bool {
        let prefix = "--parent-window="
        let number = argument.dropFirst(prefix.count)
        return argument.hasPrefix(prefix) && !number.isEmpty && number.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// The words Firefox starts a host with: a manifest's absolute path and an add-on ID.
    private static func isFirefoxShaped(_ arguments: [String]) -> Bool {
        guard arguments.count == 2, arguments[0].hasPrefix("/"), arguments[0].hasSuffix(".json"),
              case .firefox? = BrowserExtensionID(arguments[1]) else { return false }
        return true
    }

    /// Why `path` is not a host manifest naming devtrust's host (a regular file, or a link to
    /// one, of at most 64 KiB, holding a JSON object), or nil when it is. Checked before it is
    /// opened and read without blocking: the path comes from the command line, and a FIFO or a
    /// device there must not hang devtrust or be acted on.
    private static func manifestProblem(_ path: String) -> String? {
        let bytes: [UInt8]
        do {
            bytes = try FileReader.readRegularFile(path, limit: 1 << 16)
        } catch {
            return error.reason
        }
        guard case let .object(manifest)? = try? JSONParser.parse(bytes) else { return "not a JSON object" }
        return manifest["name"] == .string(NativeHostManifest.hostName) ? nil : "it names another host"
    }

    /// The error for words shaped as Firefox's whose manifest is not devtrust's: said plainly,
    /// instead of reading the path as an unknown command.
    package static func refusedFirefoxLaunch(_ arguments: [String]) -> UsageError? {
        guard isFirefoxShaped(arguments), let problem = manifestProblem(arguments[0]) else { return nil }
        return UsageError("started as Firefox starts a native messaging host, with \(arguments[0]), which is not devtrust's host manifest "
                          + "(\(problem)); `devtrust browser install --firefox` writes the manifest, and `devtrust --help` lists the commands")
    }

    /// Whether the words after `devtrust` are how a browser starts a host whose
    /// manifest names the devtrust binary itself: then they mean `native-host`.
    package static func isBrowserLaunch(_ arguments: [String]) -> Bool {
        NativeHostCaller(arguments: arguments) != nil
    }

    package func isAllowed(_ allowed: [BrowserExtensionID]) -> Bool {
        switch self {
        case let .chromium(id): allowed.contains(.chromium(id))
        case let .firefox(id): allowed.contains(.firefox(id))
        }
    }

    package var description: String {
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
package struct NativeHost {
    /// The `error` of an error reply.
    package enum ErrorCode: String {
        case badRequest = "bad_request", notAllowed = "not_allowed", noKey = "no_key", notRegistered = "not_registered"
        case tpm, keystore, config, failed

        /// The code of an error the host did not make itself: what the extension tells apart
        /// (a key to make, a registration to make, the TPM, the keystore, the configuration), else `failed`.
        package init(_ category: ErrorCategory) {
            switch category {
            case .noDeviceKey: self = .noKey
            case .notRegistered: self = .notRegistered
            case .notPermitted: self = .notAllowed
            case .tpm: self = .tpm
            case .keystore: self = .keystore
            case .configuration: self = .config
            case .usage, .serverRefused, .oauthError, .approvalExpired, .approvalDenied, .unsupported, .network, .protocolViolation, .interrupted, .failure:
                self = .failed
            }
        }
    }

    /// An error reply, and whether the host goes on serving after it.
    package struct Refusal: Error {
        package let code: ErrorCode
        package let message: String
        package var endsSession = false
        /// Decided from the device's state (no key, no registration for the URL, or one the key's
        /// holder no longer has): a remembered state may have been out of date.
        var fromState = false
    }

    /// The longest `id` echoed back.
    package static let maximumIDBytes = 256
    /// The most of a request's text (its URL) that a message repeats.
    package static let maximumEchoedCharacters = 200
    /// The longest message an error reply carries.
    package static let maximumMessageCharacters = 1_000

    package let services: NativeHostServices
    package let caller: NativeHostCaller
    package let channel: NativeMessagingChannel

    package init(services: NativeHostServices, caller: NativeHostCaller, channel: NativeMessagingChannel) {
        self.services = services
        self.caller = caller
        self.channel = channel
    }

    /// How a session ended.
    package enum Outcome: Equatable {
        /// The browser closed stdin.
        case finished
        /// After input that ends the session (refused caller, bad frame, not JSON), answered with an error.
        case refused
        /// Stdout was closed: the browser no longer reads.
        case outputClosed
    }

    /// Serves messages until the browser closes stdin.
    package func serve() -> Outcome {
        while true {
            let body: [UInt8]
            switch channel.receive() {
            case .end:
                return .finished
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
                let reply = try answer(request, id: id)
                guard send(.object(Self.with(id, reply)), id: id) else { return .outputClosed }
            } catch {
                if error.endsSession { return end(error, id: id) }
                log(error)
                guard send(Self.reply(error, id: id), id: id) else { return .outputClosed }
            }
        }
    }

    /// The reply to a message after which the host stops.
    private func end(_ refusal: Refusal, id: JSONValue?) -> Outcome {
        log(refusal)
        return send(Self.reply(refusal, id: id), id: id) ? .refused : .outputClosed
    }

    /// Sends `reply`, or an error in its place when it is larger than a browser takes (1 MiB);
    /// false when stdout is closed.
    private func send(_ reply: JSONValue, id: JSONValue?) -> Bool {
        let bytes = JSONWriter.bytes(reply)
        guard bytes.count <= NativeMessagingChannel.maximumOutgoingBytes else {
            let refusal = Refusal(code: .failed, message: "the reply would be \(bytes.count) bytes; a browser takes at most \(NativeMessagingChannel.maximumOutgoingBytes)")
            log(refusal)
            return channel.send(Self.reply(refusal, id: id))
        }
        return channel.send(bytes: bytes)
    }

    /// At most `maximumEchoedCharacters` of text from a request (a URL), for a message.
    package static func echoed(_ text: some StringProtocol) -> String {
        text.count <= maximumEchoedCharacters ? String(text) : text.prefix(maximumEchoedCharacters) + "… (\(text.utf8.count) bytes)"
    }

    private func log(_ refusal: Refusal) {
        services.log("native-host: \(refusal.code.rawValue): \(refusal.message)")
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

    private func answer(_ request: JSONObject, id: JSONValue?) throws(Refusal) -> JSONObject {
        // A configuration that cannot be used leaves devtrust's own extension to be answered (with the error).
        let loaded: Result<Configuration, ConfigError>
        do {
            loaded = .success(try services.configuration())
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
        case let .failure(error): throw Self.refusal(error)
        }
        switch request["type"] {
        case .string("config")?:
            return try config(configuration)
        case .string("token")?:
            guard case let .string(url)? = request["url"] else {
                throw Refusal(code: .badRequest, message: "a token request needs \"url\": the authorization URL navigated to")
            }
            return try token(for: url, configuration: configuration, id: id)
        case let .string(type)?:
            throw Refusal(code: .badRequest, message: "unknown request type \"\(TerminalText.printable(String(type.prefix(64))))\" (the host answers config and token)")
        default:
            throw Refusal(code: .badRequest, message: "a request needs \"type\": \"config\" or \"token\"")
        }
    }

    private func config(_ configuration: Configuration) throws(Refusal) -> JSONObject {
        let state = try keystoreState(configuration)
        var endpoints = BrowserEndpoints.registered(state)
        addProfiles(to: &endpoints, configuration, state: state, purpose: .config)
        return ["type": .string("config"), "version": .integer(1),
                "authorizationEndpoints": .array(endpoints.endpoints.map { .string($0.description) }),
                "revision": .string(endpoints.revision)]
    }

    private func token(for url: String, configuration: Configuration, id: JSONValue?) throws(Refusal) -> JSONObject {
        let device: NativeHostDevice
        let recent: (state: KeystoreState, remembered: Bool)
        do {
            device = try services.device(configuration)
            recent = try device.recentState()
        } catch {
            throw Self.refusal(error)
        }
        do throws(Refusal) {
            return try token(for: url, configuration: configuration, id: id, device: device, state: recent.state)
        } catch where recent.remembered && error.fromState {
            // A registration made, replaced or forgotten since the state was remembered: asked again, once.
            let state: KeystoreState
            do {
                state = try device.state()
            } catch {
                throw Self.refusal(error)
            }
            return try token(for: url, configuration: configuration, id: id, device: device, state: state)
        }
    }

    private func token(for url: String, configuration: Configuration, id: JSONValue?, device: NativeHostDevice,
                       state: KeystoreState) throws(Refusal) -> JSONObject {
        guard state.key != nil else {
            var refusal = Self.refusal(device.noKey())
            refusal.fromState = true
            throw refusal
        }
        guard !BrowserEndpoints.currentRegistrations(state).isEmpty else {
            throw Refusal(code: .notRegistered, message: "this device is not registered with any server; run `devtrust register --server URL`", fromState: true)
        }
        let endpoint: AuthorizationEndpoint
        do {
            endpoint = try AuthorizationEndpoint(navigation: url)
        } catch {
            throw Refusal(code: .notAllowed, message: "no device token for this URL: \(Self.echoed(error.description))")
        }
        if Self.carriesDeviceToken(url) {
            throw Refusal(code: .notAllowed, message: "no device token for \(Self.echoed(endpoint.description)): the URL carries a device_token already, and a sign-in gets one only")
        }
        var endpoints = BrowserEndpoints.registered(state)
        // Discovery only for a URL the registrations do not explain.
        if endpoints.entry(for: endpoint) == nil { addProfiles(to: &endpoints, configuration, state: state, purpose: .token) }
        guard let entry = endpoints.entry(for: endpoint) else {
            throw Refusal(code: .notAllowed, message: "no device token for \(Self.echoed(endpoint.description)): it is not the authorization endpoint of a server this device is registered with",
                          fromState: true)
        }
        // A TPM that stopped answering would hold the browser's navigation forever: after a bound
        // (SigningDeadline.nativeHostSeconds), the host answers so (the extension then navigates
        // without a token) and ends.
        let seconds = SigningDeadline.nativeHostSeconds
        let late = state.key?.backend == .tpm ? Refusal(code: .tpm, message: "the TPM did not answer in \(seconds) s")
            : Refusal(code: .failed, message: "signing did not finish in \(seconds) s")
        let deadline = SigningDeadline.nativeHost(reply: NativeMessagingChannel.frame(JSONWriter.bytes(Self.reply(late, id: id))),
                                                  exitStatus: services.deadlineExitStatus)
        do {
            // The registration of the endpoint, checked against the key now loaded.
            let token = try device.deviceToken(entry.registration, deadline)
            return ["type": .string("token"), "token": .string(token)]
        } catch {
            var refusal = Self.refusal(error)
            // The key's holder has no such key or registration (any more).
            refusal.fromState = refusal.code == .noKey || refusal.code == .notRegistered
            throw refusal
        }
    }

    /// Whether the query has a `device_token` parameter, its name percent-encoded or not.
    package static func carriesDeviceToken(_ url: String) -> Bool {
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        return parts[1].split(separator: "&").contains { pair in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            return (FormEncoding.unescape(name) ?? String(name)) == "device_token"
        }
    }

    private func keystoreState(_ configuration: Configuration) throws(Refusal) -> KeystoreState {
        do {
            return try services.device(configuration).state()
        } catch {
            throw Self.refusal(error)
        }
    }

    private func addProfiles(to endpoints: inout BrowserEndpoints, _ configuration: Configuration, state: KeystoreState,
                             purpose: NativeHostDiscovery.Purpose) {
        var discovery = NativeHostDiscovery(services: services, configuration: configuration, purpose: purpose,
                                            urls: BrowserEndpoints.discoveryURLs(configuration, state: state))
        let log = services.log
        endpoints.addProfiles(configuration, state: state,
                              discover: { try discovery.discover($0) },
                              note: { log("native-host: \($0)") })
        discovery.save()
    }

    /// The error reply for what loading the configuration, or loading or using the key, threw: its
    /// code by its category, its message as the command line words it.
    package static func refusal(_ error: any Error) -> Refusal {
        let report = ErrorReport.from(error)
        return Refusal(code: ErrorCode(report.category), message: report.message)
    }

    package static func reply(_ refusal: Refusal, id: JSONValue?) -> JSONValue {
        let message = refusal.message.count <= maximumMessageCharacters ? refusal.message : refusal.message.prefix(maximumMessageCharacters) + "…"
        return .object(with(id, ["type": .string("error"), "error": .string(refusal.code.rawValue), "message": .string(message)]))
    }

    private static func with(_ id: JSONValue?, _ reply: JSONObject) -> JSONObject {
        var reply = reply
        if let id { reply["id"] = id }
        return reply
    }
}
