import DevtrustSystem
import Glibc

/// `linuxOsVersion` (VERSION_ID) and `osName` (ID) from os-release, and
/// `kernelVersion` from the running kernel.
enum OSReleaseCollector {
    static func collect(_ input: PostureInput) -> [Attribute] {
        var attributes = [Attribute]()
        let candidates = ["/etc/os-release", "/usr/lib/os-release"]
        if let (path, fields) = candidates.lazy.compactMap({ path in (try? FileReader.read(input.path(path), limit: 65_536)).map { (path, parse($0)) } }).first {
            for (claim, key) in [("linuxOsVersion", "VERSION_ID"), ("osName", "ID")] {
                if let value = fields[key], isPlausible(value) {
                    attributes.append(Attribute(name: claim, value: value, source: "\(key) in \(path)"))
                } else {
                    attributes.append(.absent(claim, "\(path) has no usable \(key)"))
                }
            }
        } else {
            attributes.append(.absent("linuxOsVersion", "neither /etc/os-release nor /usr/lib/os-release can be read"))
            attributes.append(.absent("osName", "neither /etc/os-release nor /usr/lib/os-release can be read"))
        }
        attributes.append(kernel(input))
        return attributes
    }

    static func kernel(_ input: PostureInput) -> Attribute {
        if let bytes = try? FileReader.read(input.path("/proc/sys/kernel/osrelease"), limit: 256) {
            let value = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            if isPlausible(value) { return Attribute(name: "kernelVersion", value: value, source: "/proc/sys/kernel/osrelease") }
        }
        if input.root.isEmpty {
            var names = utsname()
            if uname(&names) == 0 {
                let release = withUnsafeBytes(of: names.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
                if isPlausible(release) { return Attribute(name: "kernelVersion", value: release, source: "uname()") }
            }
        }
        return .absent("kernelVersion", "/proc/sys/kernel/osrelease cannot be read")
    }

    /// os-release: KEY=VALUE lines, values unquoted, "double-quoted" (with
    /// backslash escapes) or 'single-quoted'; anything else is skipped.
    static func parse(_ bytes: [UInt8]) -> [String: String] {
        var fields = [String: String]()
        for rawLine in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let line = rawLine.drop(while: \.isWhitespace)
            guard !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<equals])
            guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") }) else { continue }
            var value = Substring(line[line.index(after: equals)...])
            while let last = value.last, last.isWhitespace { value.removeLast() }
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                var unescaped = ""
                var escaping = false
                for character in value.dropFirst().dropLast() {
                    if escaping { unescaped.append(character); escaping = false } else if character == "\\" { escaping = true } else { unescaped.append(character) }
                }
                fields[key] = unescaped
            } else if value.hasPrefix("'"), value.hasSuffix("'"), value.count >= 2 {
                fields[key] = String(value.dropFirst().dropLast())
            } else if !value.contains(where: { "\"'`$\\ ".contains($0) }) {
                fields[key] = String(value)
            }
        }
        return fields
    }

    /// Short printable text: what a claim may carry.
    static func isPlausible(_ value: String) -> Bool {
        !value.isEmpty && value.count <= 64 && value.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
    }
}
