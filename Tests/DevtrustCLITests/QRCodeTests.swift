@testable import DevtrustCLI
import DevtrustTestSupport
import Foundation
import Testing

/// The QR code of the device-code screen, drawn by the real libqrencode.
@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/libqrencode.so.4") || ExternalTool.isCI))
struct QRCodeTests {
    @Test func aURLIsDrawnInHalfBlocks() throws {
        let lines = try QRCode.render("https://idp.example/device?user_code=WDJB-MJHT").get()
        // A QR code of version V is 17 + 4V modules square; a quiet zone of 2 on each side, two rows a line.
        let columns = try #require(Set(lines.map(\.count)).first, "\(lines)")
        #expect(Set(lines.map(\.count)).count == 1 && (columns - 4 - 17) % 4 == 0 && lines.count == (columns + 1) / 2, "\(lines)")
        #expect(lines.allSatisfy { $0.allSatisfy { "█▀▄ ".contains($0) } })
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
