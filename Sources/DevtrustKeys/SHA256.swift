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
        var digest = [UInt8](repeating: 0, count: 32)
        let bytes = data as? [UInt8] ?? Array(data)
        bytes.withUnsafeBytes { input in devtrust_sha256(input.baseAddress, input.count, &digest) }
        return SHA256Digest(unchecked: digest)
    }
}
