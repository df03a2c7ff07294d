import CQRCode
import Glibc

/// A QR code drawn with half blocks: two modules per character row, with the quiet zone.
package enum QRCode {
    /// Why no QR code was drawn, for `-v`.
    package struct Problem: Error {
        package let message: String
    }

    /// The light margin around the code, in modules: 4, as the QR code specification asks
    /// (2 rows of half blocks above and below).
    package static let quietZone = 4
    /// Black on white (the terminal's colours 0 and 7), set explicitly: dark modules on
    /// light whatever the theme. Many scanners do not read a code whose colours are inverted.
    package static let colours = "\u{1B}[30;47m"

    /// The rows of the code. Each row's `styled` text is in `colours`, dark modules the
    /// foreground. Its plain `text`, for where devtrust sets no colours (NO_COLOR,
    /// TERM=dumb), has to assume the terminal's: light text on a dark background, the
    /// usual default, so light modules are the foreground there (on a light theme
    /// that code is inverted).
    package static func render(_ text: String) -> Result<[DeviceCodeScreen.Line], Problem> {
        var width: Int32 = 0
        var modules: UnsafeMutablePointer<UInt8>?
        var error = [CChar](repeating: 0, count: 256)
        let status = devtrust_qrcode_encode(text, &width, &modules, &error, Int32(error.count))
        let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard status == 0, let modules else {
            return .failure(Problem(message: status == -1 ? "libqrencode is not available (\(reason))" : reason))
        }
        defer { free(modules) }
        let size = Int(width)
        let quiet = Self.quietZone
        func dark(_ row: Int, _ column: Int) -> Bool {
            guard row >= 0, row < size, column >= 0, column < size else { return false }
            return modules[row * size + column] != 0
        }
        var lines = [DeviceCodeScreen.Line]()
        var row = -quiet
        while row < size + quiet {
            var lightForeground = "", darkForeground = ""
            for column in -quiet..<(size + quiet) {
                switch (dark(row, column), dark(row + 1, column)) {
                case (false, false): lightForeground += "█"; darkForeground += " "
                case (false, true): lightForeground += "▀"; darkForeground += "▄"
                case (true, false): lightForeground += "▄"; darkForeground += "▀"
                case (true, true): lightForeground += " "; darkForeground += "█"
                }
            }
            lines.append(DeviceCodeScreen.Line(text: lightForeground, styled: Self.colours + darkForeground + "\u{1B}[0m"))
            row += 2
        }
        return .success(lines)
    }
}
