import COpenSSL

public struct SHA256Digest: Equatable, Hashable, Sendable {
    public let bytes: [UInt8]

    /// Wraps an existing 32-byte digest.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    fileprivate init(unchecked bytes: [UInt8]) {
        self.bytes = bytes
    }
}

public enum SHA256 {
    public static func hash(_ data: some Collection<UInt8>) -> SHA256Digest {
        OpenSSLLibrary.ensureInitialized()
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = Array(data).withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        // EVP_Digest with the built-in SHA-256 fails only when memory runs out.
        precondition(ok == 1 && length == 32, "SHA-256 failed: \(OpenSSLError.capture("EVP_Digest"))")
        return SHA256Digest(unchecked: digest)
    }
}
