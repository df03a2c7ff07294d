extension StringProtocol {
    /// Whether `part` occurs in the text, compared as UTF-8 bytes. devtrust
    /// does not link Swift's regex library (_StringProcessing), which is what
    /// provides `contains(_: some StringProtocol)`; that saves ~1 MB of code.
    public func includes(_ part: some StringProtocol) -> Bool {
        let haystack = Array(utf8), needle = Array(part.utf8)
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
