import DevtrustEncoding

/// The secrets a request to the server carries: a device code, an auth_req_id, a refresh
/// token, an authorization code and its verifier, a token to revoke. A server, or a proxy
/// in front of it, may repeat them in what it answers (an error_description, an error
/// page: "unknown auth_req_id …"), and devtrust shows that text on stderr and in --json
/// events; so every text of the server's that a message carries has them replaced first,
/// here, where the request's parameters are known.
struct RequestSecrets: Sendable {
    static let parameterNames: Set<String> = ["auth_req_id", "device_code", "refresh_token", "code", "code_verifier", "token"]

    /// Each form a secret may be echoed in (as sent, form-encoded, with JSON's escaped slash), and what replaces it.
    private let replacements: [(form: [UInt8], placeholder: [UInt8])]

    init(_ parameters: [(String, String)]) {
        var replacements = [(form: [UInt8], placeholder: [UInt8])]()
        for (name, value) in parameters where Self.parameterNames.contains(name) && !value.isEmpty {
            let jsonEscaped = value.utf8.flatMap { $0 == UInt8(ascii: "/") ? Array(#"\/"#.utf8) : [$0] }
            for form in Set([Array(value.utf8), Array(FormEncoding.escape(value).utf8), jsonEscaped]) {
                replacements.append((form, Array("[\(name)]".utf8)))
            }
        }
        // The longest first: a form that holds another is replaced whole.
        self.replacements = replacements.sorted { $0.form.count > $1.form.count }
    }

    func hiding(in text: String) -> String {
        replacements.isEmpty ? text : String(decoding: hiding(in: Array(text.utf8)), as: UTF8.self)
    }

    /// A body with the secrets replaced, before any part of it is shown (a preview cut
    /// in the middle of a secret would show its first characters).
    func hiding(in body: [UInt8]) -> [UInt8] {
        replacements.reduce(body) { Self.replacing($1.form, with: $1.placeholder, in: $0) }
    }

    private static func replacing(_ form: [UInt8], with placeholder: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes.count - index >= form.count, bytes[index..<(index + form.count)].elementsEqual(form) {
                result += placeholder
                index += form.count
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return result
    }
}

/// How long a grant the user approves elsewhere lives, and how often to poll for it, as the
/// device authorization answer (RFC 8628 3.2) and the backchannel authentication answer
/// (CIBA Core 7.3) give them: numbers, or strings of numbers as some servers write them.
public struct PollingSchedule: Equatable, Sendable {
    /// A day at most: a longer life is a server's mistake, and must not overflow the deadline.
    public static let longestLifetime: Int64 = 86_400

    public let expiresIn: Int64
    /// Nil when the answer gives none that is usable (0, negative, not a number): the 5 s default.
    public let interval: Int64?

    /// Nil without a positive `expires_in`.
    public init?(_ answer: JSONObject) {
        guard let expiresIn = Self.seconds(answer["expires_in"]), expiresIn > 0 else { return nil }
        self.expiresIn = min(expiresIn, Self.longestLifetime)
        // Within the grant's life: a longer interval would never poll.
        interval = Self.seconds(answer["interval"]).flatMap { $0 > 0 ? min($0, min(expiresIn, Self.longestLifetime)) : nil }
    }

    /// Whole seconds of a JSON number (8, 8.0, 1e3) or a string of one; fractions are dropped.
    static func seconds(_ value: JSONValue?) -> Int64? {
        let text: String
        switch value {
        case let .number(number)?: text = number
        case let .string(string)?: text = string
        default: return nil
        }
        if let whole = Int64(text) { return whole }
        guard text.utf8.allSatisfy({ (0x30...0x39).contains($0) || [0x2B, 0x2D, 0x2E, 0x45, 0x65].contains($0) }),
              let number = Double(text), number.isFinite else { return nil }
        return number >= 9.2e18 ? .max : number <= -9.2e18 ? .min : Int64(number.rounded(.towardZero))
    }
}
