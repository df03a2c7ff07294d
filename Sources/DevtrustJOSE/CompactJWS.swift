import DevtrustEncoding
import DevtrustKeys

/// A JWS compact serialization that failed to parse.
public struct JWSFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public var description: String { message }
}

/// ES256 compact JWS: `base64url(header) . base64url(payload) . base64url(r||s)`.
public enum CompactJWS {
    /// Signs `payload` under `header` (written as given, compact, members in order).
    public static func sign(header: JSONObject, payload: JSONObject, with key: some DeviceKey) throws -> String {
        let signingInput = Base64URL.encode(JSONWriter.bytes(.object(header))) + "." + Base64URL.encode(JSONWriter.bytes(.object(payload)))
        let signature = try key.sign(message: signingInput.utf8)
        return signingInput + "." + Base64URL.encode(signature.raw)
    }
}

/// The parts of a compact JWS, decoded but not yet verified.
public struct ParsedJWS: Sendable {
    public let header: JSONObject
    public let payload: [UInt8]
    public let signature: [UInt8]
    /// The ASCII bytes `header.payload` that the signature covers.
    public let signingInput: [UInt8]

    public init(compact: String) throws(JWSFormatError) {
        let text = compact.utf8
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw JWSFormatError(message: "a compact JWS has 3 dot-separated parts, this has \(parts.count)")
        }
        func decode(_ part: Substring.UTF8View.SubSequence, _ name: String) throws(JWSFormatError) -> [UInt8] {
            do {
                return try Base64URL.decode(String(decoding: part, as: UTF8.self))
            } catch {
                throw JWSFormatError(message: "the \(name) is not unpadded base64url: \(error)")
            }
        }
        let headerBytes = try decode(parts[0], "header")
        payload = try decode(parts[1], "payload")
        signature = try decode(parts[2], "signature")
        guard case let .object(header)? = try? JSONParser.parse(headerBytes) else {
            throw JWSFormatError(message: "the header is not a JSON object")
        }
        self.header = header
        signingInput = Array(text[text.startIndex..<parts[1].endIndex])
    }

    /// The payload as a JSON object (the claims of a JWT).
    public func claims() throws(JWSFormatError) -> JSONObject {
        guard case let .object(claims)? = try? JSONParser.parse(payload) else {
            throw JWSFormatError(message: "the payload is not a JSON object")
        }
        return claims
    }
}
