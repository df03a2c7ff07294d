import DevtrustEncoding
import Testing

@Suite struct TextSearchTests {
    @Test(arguments: [
        ("-----BEGIN PRIVATE KEY-----\nMIG", "-----BEGIN PRIVATE KEY-----", true),
        ("https://example.org", "://", true),
        ("ThinkPad X1 Carbon Gen 11", "Gen 11", true),
        ("ThinkPad", "ThinkPad X1", false),
        ("abc", "", true),
        ("", "a", false),
        ("café crème", "é c", true),
        ("aaab", "aab", true),
        ("aaab", "abb", false),
    ])
    func includes(text: String, part: String, expected: Bool) {
        #expect(text.includes(part) == expected)
        #expect(Substring(text).includes(part) == expected)
    }
}
