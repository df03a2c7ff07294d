/// Text from servers, files and other users reaches the terminal only through
/// this: control characters (escape sequences that could retitle, clear or
/// rewrite the terminal, carriage returns that overwrite a line), Unicode
/// direction overrides and marks, and invisible characters (zero-width spaces
/// and joiners, the byte-order mark) are shown as `\u{1B}`-style escapes.
/// `printable` keeps newlines and tabs (messages of several lines);
/// `oneLine` shows them as escapes too, for text that must stay on one line
/// (a user code, a URI) so that it can neither add lines of its own nor push
/// the rest of a screen away.
package enum TerminalText {
    package static func printable(_ text: String) -> String {
        escaping(text, where: isUnsafe)
    }

    package static func oneLine(_ text: String) -> String {
        escaping(text) { isUnsafe($0) || breaksLine($0) }
    }

    package static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: return false
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        case 0x200B...0x200D, 0x2060...0x2064, 0xFEFF: return true
        default: return false
        }
    }

    /// Newlines, tabs, and the line and paragraph separators.
    private static func breaksLine(_ scalar: Unicode.Scalar) -> Bool {
        [0x0A, 0x09, 0x2028, 0x2029].contains(scalar.value)
    }

    private static func escaping(_ text: String, where shouldEscape: (Unicode.Scalar) -> Bool) -> String {
        guard text.unicodeScalars.contains(where: shouldEscape) else { return text }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if shouldEscape(scalar) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
