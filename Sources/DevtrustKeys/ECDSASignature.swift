import COpenSSL
import DevtrustEncoding

public struct SignatureEncodingError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// A raw signature that is not exactly 64 bytes.
        case wrongRawLength(Int)
        /// Not a DER SEQUENCE of two minimal positive INTEGERs (OpenSSL refused it,
        /// or it is not the one canonical encoding of the values it holds).
        case malformedDER
        /// Bytes after the DER SEQUENCE.
        case trailingBytes(Int)
        /// r or s is zero or not below the P-256 group order n.
        case outOfRange
    }

    public let reason: Reason

    public init(reason: Reason) { self.reason = reason }

    public var description: String {
        switch reason {
        case let .wrongRawLength(count): return "a raw ES256 signature is 64 bytes (r||s), this one is \(count)"
        case .malformedDER: return "not a canonical DER ECDSA signature (SEQUENCE of two minimal positive INTEGERs)"
        case let .trailingBytes(count): return "\(count) unexpected byte(s) after the DER signature"
        case .outOfRange: return "r or s is zero or not below the P-256 group order"
        }
    }
}

/// A P-256 ECDSA signature held as r and s, each 32 bytes big-endian.
///
/// Every backend produces one of these; `der` is what registration sends,
/// `raw` (r||s) is what a JWS carries.
public struct ECDSASignature: Equatable, Hashable, Sendable {
    public let r: [UInt8]
    public let s: [UInt8]

    /// The order n of the P-256 group.
    public static let p256Order: [UInt8] = Hex.decodeConstant(
        "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551")

    /// r and s as integers of up to 32 bytes (a TPM may return them shorter or zero-padded).
    public init(r: [UInt8], s: [UInt8]) throws(SignatureEncodingError) {
        let paddedR = try Self.leftPad(r)
        let paddedS = try Self.leftPad(s)
        guard Self.isInRange(paddedR), Self.isInRange(paddedS) else {
            throw SignatureEncodingError(reason: .outOfRange)
        }
        self.r = paddedR
        self.s = paddedS
    }

    /// The JOSE form: exactly 64 bytes, r||s.
    public init(raw: [UInt8]) throws(SignatureEncodingError) {
        guard raw.count == 64 else { throw SignatureEncodingError(reason: .wrongRawLength(raw.count)) }
        try self.init(r: Array(raw[0..<32]), s: Array(raw[32..<64]))
    }

    /// A DER `ECDSA-Sig-Value`; anything but the canonical encoding is refused.
    public init(der: [UInt8]) throws(SignatureEncodingError) {
        OpenSSLLibrary.ensureInitialized()
        guard !der.isEmpty else { throw SignatureEncodingError(reason: .malformedDER) }
        let parsed: (sig: OpaquePointer, consumed: Int)? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &cursor, buffer.count), let end = cursor else { return nil }
            return (sig, end - buffer.baseAddress!)
        }
        guard let parsed else {
            OpenSSLLibrary.clearErrors()
            throw SignatureEncodingError(reason: .malformedDER)
        }
        defer { ECDSA_SIG_free(parsed.sig) }
        guard parsed.consumed == der.count else {
            throw SignatureEncodingError(reason: .trailingBytes(der.count - parsed.consumed))
        }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(parsed.sig, &r, &s)
        guard let r, let s else { throw SignatureEncodingError(reason: .malformedDER) }
        guard BN_num_bits(r) <= 256, BN_num_bits(s) <= 256 else { throw SignatureEncodingError(reason: .outOfRange) }
        var rBytes = [UInt8](repeating: 0, count: 32)
        var sBytes = [UInt8](repeating: 0, count: 32)
        BN_bn2binpad(r, &rBytes, 32)
        BN_bn2binpad(s, &sBytes, 32)
        try self.init(r: rBytes, s: sBytes)
        // OpenSSL's decoder is strict about integers; comparing with the
        // re-encoding also rules out any other non-canonical form.
        guard self.der == der else { throw SignatureEncodingError(reason: .malformedDER) }
    }

    public var raw: [UInt8] { r + s }

    /// Minimal DER: leading zeros stripped, 0x00 added where the high bit is set.
    public var der: [UInt8] {
        OpenSSLLibrary.ensureInitialized()
        guard let sig = ECDSA_SIG_new() else { fatalError("out of memory: ECDSA_SIG_new") }
        defer { ECDSA_SIG_free(sig) }
        let rNumber = BN_bin2bn(r, 32, nil)
        let sNumber = BN_bin2bn(s, 32, nil)
        guard let rNumber, let sNumber, ECDSA_SIG_set0(sig, rNumber, sNumber) == 1 else {
            fatalError("out of memory: BN_bin2bn")
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        precondition(length > 0 && length <= 72, "i2d_ECDSA_SIG failed")
        var out = [UInt8](repeating: 0, count: Int(length))
        out.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_ECDSA_SIG(sig, &cursor)
        }
        return out
    }

    private static func leftPad(_ value: [UInt8]) throws(SignatureEncodingError) -> [UInt8] {
        let significant = value.drop(while: { $0 == 0 })
        guard significant.count <= 32 else { throw SignatureEncodingError(reason: .outOfRange) }
        return [UInt8](repeating: 0, count: 32 - significant.count) + significant
    }

    /// 0 < value < n, on 32-byte big-endian numbers.
    private static func isInRange(_ value: [UInt8]) -> Bool {
        guard value.contains(where: { $0 != 0 }) else { return false }
        for (a, b) in zip(value, p256Order) where a != b {
            return a < b
        }
        return false
    }
}

extension Hex {
    static func decodeConstant(_ text: StaticString) -> [UInt8] {
        guard let bytes = decode(text.description) else { preconditionFailure("bad hex constant") }
        return bytes
    }
}
