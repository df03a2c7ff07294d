import DevtrustSystem
import Glibc

/// `linuxOsVersion` (VERSION_ID) and `osName` (ID) from os-release, and
/// `kernelVersion` from the running kernel.
enum OSReleaseCollector {
    static func collect(_ input: PostureInput) -> [Attribute] {
        var attributes = [Attribute]()
        var found: (path: String, fields: [String: String])?
        for path in ["/etc/os-release", "/usr/lib/os-release"] {
            if let bytes = try? FileReader.read(input.path(path), limit: 65_536) {
                found = (path, parse(bytes))
                break
            }
        }
        if let (path, fields) = found {
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
            let value = bytes.split(whereSeparator: ASCII.isNewline).first.map { String(decoding: $0, as: UTF8.self) } ?? ""
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
    /// Parsed as bytes: this runs on every `devtrust token`.
    static func parse(_ bytes: [UInt8]) -> [String: String] {
        var fields = [String: String]()
        for rawLine in bytes.split(whereSeparator: ASCII.isNewline) {
            let line = rawLine.drop(while: ASCII.isSpace)
            guard line.first != UInt8(ascii: "#"), let equals = line.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let key = line[..<equals]
            guard !key.isEmpty, key.allSatisfy({ ASCII.isUppercase($0) || ASCII.isDigit($0) || $0 == UInt8(ascii: "_") }) else { continue }
            var value = line[line.index(after: equals)...]
            while let last = value.last, ASCII.isSpace(last) { value.removeLast() }
            let quote = value.first
            if value.count >= 2, quote == UInt8(ascii: "\""), value.last == quote {
                var unescaped = [UInt8]()
                var escaping = false
                for byte in value.dropFirst().dropLast() {
                    if escaping { unescaped.append(byte); escaping = false } else if byte == UInt8(ascii: "\\") { escaping = true } else { unescaped.append(byte) }
                }
                fields[String(decoding: key, as: UTF8.self)] = String(decoding: unescaped, as: UTF8.self)
            } else if value.count >= 2, quote == UInt8(ascii: "'"), value.last == quote {
                fields[String(decoding: key, as: UTF8.self)] = String(decoding: value.dropFirst().dropLast(), as: UTF8.self)
            } else if !value.contains(where: { ASCII.needsQuoting($0) }) {
                fields[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
            }
        }
        return fields
    }

    /// Short printable text: what a claim may carry.
    static func isPlausible(_ value: String) -> Bool {
        !value.isEmpty && value.count <= 64 && value.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
    }
}
