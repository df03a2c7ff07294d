import COpenSSL

/// Where random bytes come from; tests inject a deterministic source.
public protocol RandomSource: Sendable {
    func bytes(count: Int) throws -> [UInt8]
}

/// OpenSSL's CSPRNG (seeded from getrandom).
public struct SystemRandom: RandomSource {
    public init() {}

    public func bytes(count: Int) throws -> [UInt8] {
        OpenSSLLibrary.ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&out, Int32(count)) == 1 else { throw OpenSSLError.capture("RAND_bytes") }
        return out
    }
}
