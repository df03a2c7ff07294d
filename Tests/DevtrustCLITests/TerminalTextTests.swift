@testable import DevtrustCLI
@testable import DevtrustTerminal
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
        ("arabic letter mark \u{061C}", "arabic letter mark \\u{61C}"),
        ("zero\u{200B}width\u{200C}non\u{200D}joiner", "zero\\u{200B}width\\u{200C}non\\u{200D}joiner"),
        ("word\u{2060}joiner\u{2064}plus", "word\\u{2060}joiner\\u{2064}plus"),
        ("\u{FEFF}bom", "\\u{FEFF}bom"),
    ])
    func controlCharactersAreShownNotObeyed(input: String, shown: String) {
        #expect(TerminalText.printable(input) == shown)
    }

    /// For text that must stay on one line: newlines, tabs and line separators are escaped as well.
    @Test(arguments: [
        ("WDJB-MJHT\n\n\tx", "WDJB-MJHT\\u{A}\\u{A}\\u{9}x"),
        ("a\u{2028}b\u{2029}c\u{85}d", "a\\u{2028}b\\u{2029}c\\u{85}d"),
        ("https://idp.example/\u{1B}[2J\r\u{202E}", "https://idp.example/\\u{1B}[2J\\u{D}\\u{202E}"),
        ("café ✓ 日本", "café ✓ 日本"),
    ])
    func oneLineTextShowsLineBreaksAsEscapes(input: String, shown: String) {
        #expect(TerminalText.oneLine(input) == shown)
    }
}
