/// The user code in large letters (5 rows of blocks), readable across a room.
package enum LargeText {
    package static let glyphs: [Character: [String]] = [
        "A": [" ██ ", "█  █", "████", "█  █", "█  █"], "B": ["███ ", "█  █", "███ ", "█  █", "███ "],
        "C": [" ███", "█   ", "█   ", "█   ", " ███"], "D": ["███ ", "█  █", "█  █", "█  █", "███ "],
        "E": ["████", "█   ", "███ ", "█   ", "████"], "F": ["████", "█   ", "███ ", "█   ", "█   "],
        "G": [" ███", "█   ", "█ ██", "█  █", " ███"], "H": ["█  █", "█  █", "████", "█  █", "█  █"],
        "I": ["███", " █ ", " █ ", " █ ", "███"], "J": ["  ██", "   █", "   █", "█  █", " ██ "],
        "K": ["█  █", "█ █ ", "██  ", "█ █ ", "█  █"], "L": ["█   ", "█   ", "█   ", "█   ", "████"],
        "M": ["█   █", "██ ██", "█ █ █", "█   █", "█   █"], "N": ["█   █", "██  █", "█ █ █", "█  ██", "█   █"],
        "O": [" ██ ", "█  █", "█  █", "█  █", " ██ "], "P": ["███ ", "█  █", "███ ", "█   ", "█   "],
        "Q": [" ██ ", "█  █", "█  █", "█ ██", " ███"], "R": ["███ ", "█  █", "███ ", "█ █ ", "█  █"],
        "S": [" ███", "█   ", " ██ ", "   █", "███ "], "T": ["█████", "  █  ", "  █  ", "  █  ", "  █  "],
        "U": ["█  █", "█  █", "█  █", "█  █", " ██ "], "V": ["█   █", "█   █", "█   █", " █ █ ", "  █  "],
        "W": ["█   █", "█   █", "█ █ █", "██ ██", "█   █"], "X": ["█   █", " █ █ ", "  █  ", " █ █ ", "█   █"],
        "Y": ["█   █", " █ █ ", "  █  ", "  █  ", "  █  "], "Z": ["████", "   █", "  █ ", " █  ", "████"],
        "0": [" ██ ", "█ ██", "██ █", "█  █", " ██ "], "1": [" █ ", "██ ", " █ ", " █ ", "███"],
        "2": ["███ ", "   █", " ██ ", "█   ", "████"], "3": ["███ ", "   █", " ██ ", "   █", "███ "],
        "4": ["█  █", "█  █", "████", "   █", "   █"], "5": ["████", "█   ", "███ ", "   █", "███ "],
        "6": [" ██ ", "█   ", "███ ", "█  █", " ██ "], "7": ["████", "   █", "  █ ", " █  ", " █  "],
        "8": [" ██ ", "█  █", " ██ ", "█  █", " ██ "], "9": [" ██ ", "█  █", " ███", "   █", " ██ "],
        "-": ["   ", "   ", "███", "   ", "   "],
    ]

    /// Nil unless every character has a glyph, and has it as itself (uppercasing
    /// does not make two of one, as ß becomes SS): big letters with gaps or extra
    /// letters would show another code.
    package static func render(_ text: String) -> [String]? {
        let letters = text.uppercased()
        guard !letters.isEmpty, letters.count == text.count, letters.allSatisfy({ glyphs[$0] != nil }) else { return nil }
        var rows = [String](repeating: "", count: 5)
        for character in letters {
            let glyph = glyphs[character]!
            for index in 0..<5 { rows[index] += glyph[index] + "  " }
        }
        return rows
    }
}
