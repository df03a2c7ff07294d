import DevtrustEncoding
import DevtrustKeys

/// Flat string claims describing the device, in the order they are sent.
public struct DeviceAttributes: Equatable, Sendable {
    public private(set) var claims: JSONObject

    public init(platform: String = "linux") {
        claims = ["platform": .string(platform)]
    }

    /// Sets a claim; a later value replaces an earlier one in place.
    public mutating func set(_ name: String, _ value: String) {
        claims[name] = .string(value)
    }
}

/// A JWT as it was minted: its compact serialization, and the `jti` put in it (what an audit
/// names, taken from the minting rather than read back from the token).
public struct MintedJWT: Equatable, Sendable {
    public let token: String
    public let jti: String

    public init(token: String, jti: String) {
        self.token = token
        self.jti = jti
    }
}

/// Mints device data and device tokens: ES256 JWTs with a fresh `jti` and the
/// current `iat`, top-level string attributes, and for a token the `deviceId` header.
public struct DeviceTokenMinter: Sendable {
    /// How long the server accepts a token after its `iat` (server contract, section 2):
    /// what limits a URL that carries one.
    public static let acceptedForSeconds: Int64 = 300

    public let key: any DeviceKey
    public let clock: any Clock
    public let random: any RandomSource

    public init(key: any DeviceKey, clock: any Clock = SystemClock(), random: any RandomSource = SystemRandom()) {
        self.key = key
        self.clock = clock
        self.random = random
    }

    /// `deviceData` for the registration step: header `{"alg":"ES256","typ":"JWT"}`.
    public func deviceData(attributes: DeviceAttributes) throws -> String {
        try mintedDeviceData(attributes: attributes).token
    }

    /// The same, with its `jti`.
    public func mintedDeviceData(attributes: DeviceAttributes) throws -> MintedJWT {
        try mint(header: ["alg": .string("ES256"), "typ": .string("JWT")], attributes: attributes)
    }

    /// A device token: as device data, plus the header `deviceId` (the registration id).
    public func deviceToken(deviceId: String, attributes: DeviceAttributes) throws -> String {
        try mintedDeviceToken(deviceId: deviceId, attributes: attributes).token
    }

    /// The same, with its `jti`.
    public func mintedDeviceToken(deviceId: String, attributes: DeviceAttributes) throws -> MintedJWT {
        try mint(header: ["alg": .string("ES256"), "typ": .string("JWT"), "deviceId": .string(deviceId)], attributes: attributes)
    }

    private func mint(header: JSONObject, attributes: DeviceAttributes) throws -> MintedJWT {
        let jti = try UUIDv4.make(using: random)
        var claims: JSONObject = [
            "jti": .string(jti),
            "iat": .integer(clock.secondsSinceEpoch()),
        ]
        // Whatever the attributes hold, jti and iat are devtrust's, and attestationToken is never sent.
        for member in attributes.claims.members where !ClaimName.reserved.contains(member.key) {
            claims[member.key] = member.value
        }
        return MintedJWT(token: try CompactJWS.sign(header: header, payload: claims, with: key), jti: jti)
    }
}
