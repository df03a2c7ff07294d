extension StringProtocol {
    /// Whether `part` occurs in the text, compared as UTF-8 bytes. devtrust
    /// does not link Swift's regex library (_StringProcessing), which is what
    /// provides `contains(_: some StringProtocol)`; that saves ~1 MB of code.
    public func includes(_ part: some StringProtocol) -> Bool {
        Array(utf8).includes(Array(part.utf8))
    }
}

extension Array where Element == UInt8 {
    /// Whether `part` occurs in the bytes (a marker in a key file that must
    /// not become a String, which could not be wiped).
    public func includes(_ part: [UInt8]) -> Bool {
        guard part.count <= count else { return false }
        return (0...(count - part.count)).contains { self[$0..<($0 + part.count)].elementsEqual(part) }
    }
}
