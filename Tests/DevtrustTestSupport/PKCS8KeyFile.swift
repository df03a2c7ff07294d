import DevtrustEncoding

/// A PKCS#8 P-256 key file built element by element, so that a test can damage
/// exactly one element (RFC 5208 PrivateKeyInfo around an RFC 5915 ECPrivateKey).
public struct PKCS8KeyFile: Sendable {
    public var scalar: [UInt8]
    /// 0x04 || x || y; nil leaves the ECPrivateKey without its [1] publicKey.
    public var publicPoint: [UInt8]?

    /// The parts of a PKCS#8 file as OpenSSL writes it (scalar after 04 20, point after 03 42 00).
    public init?(pem: [UInt8]) {
        guard let der = PEM.decode(pem, label: "PRIVATE KEY"),
              let scalarAt = (0...der.count - 34).first(where: { der[$0] == 0x04 && der[$0 + 1] == 0x20 }),
              let pointAt = (0...der.count - 68).first(where: { der[$0] == 0x03 && der[$0 + 1] == 0x42 && der[$0 + 2] == 0 && der[$0 + 3] == 4 })
        else { return nil }
        scalar = Array(der[(scalarAt + 2)..<(scalarAt + 34)])
        publicPoint = Array(der[(pointAt + 3)..<(pointAt + 68)])
    }

    /// One damage each; `none` is the valid file, and so is `compressedPublicKey` (RFC 5915 allows it).
    public enum Damage: String, CaseIterable, Sendable {
        case none, compressedPublicKey, hybridPublicKey, leadingZeroScalar
        case bytesAfterTheFile, byteInPrivateKeyInfo, byteInAlgorithm, byteAfterECPrivateKey, byteInECPrivateKey, byteInPublicKey
        case parametersOfAnotherCurve, zeroScalar, scalarEqualToTheOrder, scalarAboveTheOrder, shortScalar, ecPrivateKeyVersion0

        public var isValid: Bool { self == .none || self == .compressedPublicKey || self == .hybridPublicKey }

        /// Whether `openssl pkcs8 -topk8 -nocrypt` writes the key again as strict
        /// PKCS#8 (it leaves out what follows an element and pads a short scalar);
        /// of the others it gives the same bytes back, or cannot read them.
        public var openSSLRewritesIt: Bool {
            self == .bytesAfterTheFile || self == .byteAfterECPrivateKey || self == .shortScalar || self == .leadingZeroScalar
        }

        /// What the refusal says (part of it).
        public var refusal: String {
            switch self {
            case .none, .compressedPublicKey, .hybridPublicKey: return ""
            case .leadingZeroScalar: return "the private key is 33 bytes, not 32"
            case .bytesAfterTheFile, .byteInPrivateKeyInfo: return "PrivateKeyInfo: 1 unexpected byte(s) at the end"
            case .byteInAlgorithm: return "algorithm: 1 unexpected byte(s) at the end"
            case .byteAfterECPrivateKey, .byteInECPrivateKey: return "ECPrivateKey: 1 unexpected byte(s) at the end"
            case .byteInPublicKey: return "publicKey: 1 unexpected byte(s) at the end"
            case .parametersOfAnotherCurve: return "the ECPrivateKey parameters name another curve than P-256"
            case .zeroScalar, .scalarEqualToTheOrder, .scalarAboveTheOrder: return "the private key is zero or not below the order of the P-256 group"
            case .shortScalar: return "the private key is 31 bytes, not 32"
            case .ecPrivateKeyVersion0: return "ECPrivateKey version is not 1"
            }
        }
    }

    static let order = Hex.decode("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551")!
    static let ecPublicKey: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let prime256v1: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    static let secp384r1: [UInt8] = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]

    public func der(_ damage: Damage = .none) -> [UInt8] {
        func extra(_ place: Damage) -> [UInt8] { damage == place ? [0x00] : [] }
        var privateKey = scalar
        switch damage {
        case .zeroScalar: privateKey = [UInt8](repeating: 0, count: 32)
        case .scalarEqualToTheOrder: privateKey = Self.order
        case .scalarAboveTheOrder: privateKey = Self.order; privateKey[31] += 1
        case .shortScalar: privateKey = Array(scalar.dropFirst())
        case .leadingZeroScalar: privateKey = [0] + scalar
        default: break
        }
        let parameters = damage == .parametersOfAnotherCurve ? DERWriter.element(tag: 0xA0, Self.secp384r1) : []
        var point = publicPoint
        switch damage {
        case .compressedPublicKey: point = publicPoint.map { [0x02 | $0[64] & 1] + $0[1..<33] }
        case .hybridPublicKey: point = publicPoint.map { [0x06 | $0[64] & 1] + $0[1...] }
        // As if the scalar's first byte were a zero left out: without the public key, which it would no longer match.
        case .shortScalar: point = nil
        default: break
        }
        let publicKey = point.map { DERWriter.element(tag: 0xA1, DERWriter.element(tag: 0x03, [0] + $0) + extra(.byteInPublicKey)) } ?? []
        let version: UInt64 = damage == .ecPrivateKeyVersion0 ? 0 : 1
        let ecPrivateKey = DERWriter.element(tag: 0x30, DERWriter.unsignedInteger(version) + DERWriter.element(tag: 0x04, privateKey)
                                            + parameters + publicKey + extra(.byteInECPrivateKey)) + extra(.byteAfterECPrivateKey)
        let algorithm = DERWriter.element(tag: 0x30, Self.ecPublicKey + Self.prime256v1 + extra(.byteInAlgorithm))
        return DERWriter.element(tag: 0x30, DERWriter.unsignedInteger(0) + algorithm + DERWriter.element(tag: 0x04, ecPrivateKey)
                                 + extra(.byteInPrivateKeyInfo)) + extra(.bytesAfterTheFile)
    }

    public func pem(_ damage: Damage = .none) -> String { PEM.encode(der(damage), label: "PRIVATE KEY") }
}
