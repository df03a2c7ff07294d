@testable import DevtrustCLI
@testable import DevtrustTerminal
import DevtrustTestSupport
import Foundation
import Testing

/// The QR code of the device-code screen, drawn by the real libqrencode.
@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/libqrencode.so.4") || ExternalTool.isCI))
struct QRCodeTests {
    @Test func aURLIsDrawnInHalfBlocks() throws {
        let lines = try QRCode.render("https://idp.example/device?user_code=WDJB-MJHT").get().map(\.text)
        // A QR code of version V is 17 + 4V modules square; a quiet zone of 4 on each side, two rows a line.
        let columns = try #require(Set(lines.map(\.count)).first, "\(lines)")
        #expect(Set(lines.map(\.count)).count == 1 && (columns - 8 - 17) % 4 == 0 && lines.count == (columns + 1) / 2, "\(lines)")
        #expect(lines.allSatisfy { $0.allSatisfy { "█▀▄ ".contains($0) } })
        // The quiet zone, light ("█" in the plain rows): the top two rows, four columns either side,
        // and the bottom two rows (the last one's lower half is past the code: light too).
        let light = lines.prefix(2) + lines.suffix(2) + lines.map { String($0.prefix(4)) + String($0.suffix(4)) }
        #expect(light.allSatisfy { $0.allSatisfy { $0 == "█" } }, "\(lines)")
        // Error correction L: this 47-byte URI is version 3 (29 modules), which fits an 80×24 window.
        #expect(columns == 29 + 8, "\(columns)")
    }

    /// Too long for any QR code: the reason is the encoder's, not "libqrencode is not available".
    @Test func aTextTooLongForAQRCodeSaysSo() {
        guard case .failure(let problem) = QRCode.render(String(repeating: "a", count: 5000)) else {
            Issue.record("5000 bytes were drawn")
            return
        }
        #expect(problem.message == "the text cannot be encoded as a QR code", "\(problem.message)")
    }
}
