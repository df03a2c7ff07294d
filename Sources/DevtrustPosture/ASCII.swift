/// Byte classes for the small text files posture reads on every token:
/// parsing them as bytes costs a fraction of Character-by-Character parsing.
enum ASCII {
    static func isNewline(_ byte: UInt8) -> Bool { byte == 0x0A || byte == 0x0D }
    /// Space, tab, vertical tab, form feed (not newlines).
    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0B || byte == 0x0C }
    static func isUppercase(_ byte: UInt8) -> Bool { byte >= 0x41 && byte <= 0x5A }
    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    /// What an unquoted shell-style value may not contain: " ' ` $ \ and space.
    static func needsQuoting(_ byte: UInt8) -> Bool {
        byte == 0x22 || byte == 0x27 || byte == 0x60 || byte == 0x24 || byte == 0x5C || byte == 0x20
    }
}
