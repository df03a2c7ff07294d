import DevtrustEncoding

/// Site defaults from the JSON configuration file (docs/configuration.md).
public struct Configuration: Equatable, Sendable {
    /// The `platform` claim; `linux` unless the administrator says otherwise.
    public var platform: String
    /// Extra flat claims added to every device data JWT and device token, in order.
    public var claims: [(name: String, value: String)]
    /// HTTP timeouts for talking to servers.
    public var http = HTTPSettings()
    /// Whether `hardwareModel` (the DMI product name) is reported: off by default, for privacy.
    public var inventory = false
    /// The administrator's posture collector: a program and its arguments.
    public var collector: [String]?
    public var collectorTimeoutSeconds = 2
    /// How long results of slow collectors (subprocesses) are reused.
    public var postureCacheSeconds = 300
    /// Named sign-in setups (`signIn.profiles`).
    public var signInProfiles: [String: SignInProfile] = [:]
    /// Browser extensions besides devtrust's own that may ask the native
    /// messaging host for device tokens (`browser.extensionIds`): an
    /// organisation's repackaging of the extension under its own key.
    public var browserExtensionIDs: [BrowserExtensionID] = []
    /// The file this came from, nil for built-in defaults.
    public var source: String?

    public struct HTTPSettings: Equatable, Sendable {
        public var connectTimeoutSeconds = 10
        public var requestTimeoutSeconds = 30

        public init() {}
    }

    public static let knownFields = ["platform", "claims", "http", "inventory", "collector", "collectorTimeoutSeconds", "postureCacheSeconds", "signIn", "browser"]

    public init(platform: String = "linux", claims: [(name: String, value: String)] = [], source: String? = nil) {
        self.platform = platform
        self.claims = claims
        self.source = source
    }

    public static func == (lhs: Configuration, rhs: Configuration) -> Bool {
        lhs.platform == rhs.platform && lhs.source == rhs.source && lhs.http == rhs.http && lhs.inventory == rhs.inventory
            && lhs.collector == rhs.collector && lhs.collectorTimeoutSeconds == rhs.collectorTimeoutSeconds
            && lhs.postureCacheSeconds == rhs.postureCacheSeconds && lhs.signInProfiles == rhs.signInProfiles
            && lhs.browserExtensionIDs == rhs.browserExtensionIDs
            && lhs.claims.map(\.name) == rhs.claims.map(\.name) && lhs.claims.map(\.value) == rhs.claims.map(\.value)
    }

    /// Parses a configuration document; errors name the field and the file.
    public static func parse(_ bytes: [UInt8], file: String) throws(ConfigError) -> Configuration {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw ConfigError(file: file, problem: .notJSON(error.description))
        }
        do throws(JSONFieldError) {
            let reader = try JSONObjectReader(document, path: "")
            try reader.rejectUnknownFields(known: knownFields)
            var configuration = Configuration(source: file)
            if let platform = try reader.optionalString("platform") {
                guard !platform.isEmpty else {
                    throw JSONFieldError(path: "platform", kind: .invalidValue("must not be empty"))
                }
                configuration.platform = platform
            }
            for (name, value) in try reader.optionalStringMap("claims") {
                if let problem = ClaimName.givenClaimProblem(with: name) {
                    throw JSONFieldError(path: "claims.\(name)", kind: .invalidValue(problem))
                }
                configuration.claims.append((name, value))
            }
            configuration.inventory = try reader.optionalBool("inventory") ?? false
            if reader.object["collector"] != nil {
                let arguments = try reader.array("collector")
                var command = [String]()
                for (index, argument) in arguments.enumerated() {
                    guard case let .string(text) = argument else {
                        throw JSONFieldError(path: "collector[\(index)]", kind: .invalidType(expected: "a string", found: argument.kindDescription))
                    }
                    command.append(text)
                }
                guard let program = command.first, program.hasPrefix("/") else {
                    throw JSONFieldError(path: "collector", kind: .invalidValue("must start with the collector program's absolute path, e.g. [\"/usr/lib/acme/posture\"]"))
                }
                configuration.collector = command
            }
            // One call per number, not a loop over (key, key path, range): that array's
            // types and key paths were made at run time on every run (150,000 instructions).
            func bounded(_ key: String, _ range: ClosedRange<Int>) throws(JSONFieldError) -> Int? {
                guard reader.object[key] != nil else { return nil }
                let value = try reader.int(key)
                guard range.contains(Int(value)) else {
                    throw JSONFieldError(path: key, kind: .invalidValue("must be \(range.lowerBound) to \(range.upperBound)"))
                }
                return Int(value)
            }
            if let seconds = try bounded("collectorTimeoutSeconds", 1...60) { configuration.collectorTimeoutSeconds = seconds }
            if let seconds = try bounded("postureCacheSeconds", 0...86_400) { configuration.postureCacheSeconds = seconds }
            if let signIn = try reader.optionalObject("signIn") {
                try signIn.rejectUnknownFields(known: ["profiles"])
                if let profiles = try signIn.optionalObject("profiles") {
                    for member in profiles.object.members {
                        configuration.signInProfiles[member.key] = try SignInProfile.parse(try JSONObjectReader(member.value, path: profiles.fieldPath(member.key)))
                    }
                }
            }
            if let browser = try reader.optionalObject("browser") {
                try browser.rejectUnknownFields(known: ["extensionIds"])
                if browser.object["extensionIds"] != nil {
                    for (index, value) in try browser.array("extensionIds").enumerated() {
                        let path = browser.fieldPath("extensionIds") + "[\(index)]"
                        guard case let .string(text) = value else {
                            throw JSONFieldError(path: path, kind: .invalidType(expected: "a string", found: value.kindDescription))
                        }
                        guard let id = BrowserExtensionID(text) else {
                            throw JSONFieldError(path: path, kind: .invalidValue(BrowserExtensionID.expectedForm))
                        }
                        configuration.browserExtensionIDs.append(id)
                    }
                }
            }
            if let http = try reader.optionalObject("http") {
                try http.rejectUnknownFields(known: ["connectTimeoutSeconds", "requestTimeoutSeconds"])
                for (key, path) in [("connectTimeoutSeconds", \HTTPSettings.connectTimeoutSeconds), ("requestTimeoutSeconds", \HTTPSettings.requestTimeoutSeconds)] {
                    guard http.object[key] != nil else { continue }
                    let seconds = try http.int(key)
                    guard (1...600).contains(seconds) else {
                        throw JSONFieldError(path: http.fieldPath(key), kind: .invalidValue("must be 1 to 600 seconds"))
                    }
                    configuration.http[keyPath: path] = Int(seconds)
                }
            }
            return configuration
        } catch {
            throw ConfigError(file: file, problem: .field(error))
        }
    }
}
