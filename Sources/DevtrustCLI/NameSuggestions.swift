/// "Did you mean": the known names close to a mistyped one.
enum NameSuggestions {
    /// The names that `typed` starts, or that are a small edit away from it
    /// (one edit for short words, two for longer ones; a swap of two
    /// neighbouring letters is one edit), closest first, at most three.
    /// Empty when nothing is close: a suggestion then would only mislead.
    static func closest(to typed: String, among names: [String]) -> [String] {
        let typedCharacters = Array(typed.lowercased())
        let bareLength = typedCharacters.drop { $0 == "-" }.count
        guard bareLength >= 2 else { return [] }
        let allowed = bareLength <= 4 ? 1 : 2
        var scored = [(name: String, distance: Int)]()
        for name in names where name != typed {
            let candidate = Array(name.lowercased())
            if candidate.starts(with: typedCharacters) {
                scored.append((name, 0))
                continue
            }
            let distance = editDistance(typedCharacters, candidate)
            if distance <= allowed { scored.append((name, distance)) }
        }
        return Array(scored.enumerated().sorted { ($0.element.distance, $0.offset) < ($1.element.distance, $1.offset) }
            .map(\.element.name).prefix(3))
    }

    /// `; did you mean "a"?`, `; did you mean "a" or "b"?`, or nothing.
    static func phrase(_ suggestions: [String], quoted: Bool) -> String {
        guard !suggestions.isEmpty else { return "" }
        let shown = suggestions.map { quoted ? "\"\($0)\"" : $0 }
        let listed = shown.count == 1 ? shown[0] : shown.dropLast().joined(separator: ", ") + " or " + shown.last!
        return "; did you mean \(listed)?"
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions
    /// and swaps of adjacent characters each cost one.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var beforePrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], beforePrevious[j - 2] + 1)
                }
            }
            (beforePrevious, previous, current) = (previous, current, beforePrevious)
        }
        return previous[b.count]
    }
}
