/// `text` as one word of a POSIX shell command: as it is when only safe
/// characters, else in single quotes (a quote inside as '\'').
public func shellQuoted(_ text: String) -> String {
    let safe = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
        scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "/._-+:@%".unicodeScalars.contains(scalar)
    }
    return safe ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
