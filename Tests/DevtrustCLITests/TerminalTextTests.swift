@testable import DevtrustCLI
import Testing

@Suite struct TerminalTextTests {
    @Test(arguments: [
        ("plain text, with tabs\tand\nnewlines", "plain text, with tabs\tand\nnewlines"),
        ("\u{1B}]0;owned\u{07}\u{1B}[2Jclear", "\\u{1B}]0;owned\\u{7}\\u{1B}[2Jclear"),
        ("over\rwrite", "over\\u{D}write"),
        ("c1 \u{9B}31m csi", "c1 \\u{9B}31m csi"),
        ("bidi \u{202E}txt.exe", "bidi \\u{202E}txt.exe"),
        ("café ✓ 日本", "café ✓ 日本"),
        ("nul\u{0}byte", "nul\\u{0}byte"),
    ])
    func controlCharactersAreShownNotObeyed(input: String, shown: String) {
        #expect(TerminalText.printable(input) == shown)
    }
}
