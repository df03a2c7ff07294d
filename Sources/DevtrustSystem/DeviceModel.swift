import DevtrustEncoding
import Glibc

/// A display name for the device (`deviceModel` at registration): the DMI
/// product name, else the host name. Reads below `root` so tests use fixture trees.
public enum DeviceModel {
    /// Placeholders firmware vendors leave in DMI fields.
    static let placeholders: Set<String> = [
        "to be filled by o.e.m.", "system product name", "default string", "not specified", "none", "o.e.m", "oem", "unknown",
    ]

    public static func detect(root: String = "") -> String? {
        if let product = firstLine(root + "/sys/class/dmi/id/product_name"), !placeholders.contains(product.lowercased()) {
            if let version = firstLine(root + "/sys/class/dmi/id/product_version"), !placeholders.contains(version.lowercased()),
               version.count <= 40, !product.includes(version), version.contains(where: \.isLetter) {
                return product + " " + version
            }
            return product
        }
        if let hostname = firstLine(root + "/etc/hostname") { return hostname }
        guard root.isEmpty else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    static func firstLine(_ path: String) -> String? {
        guard let bytes = try? FileReader.read(path, limit: 4096) else { return nil }
        let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        let trimmed = String(line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !trimmed.isEmpty, trimmed.count <= 128, !trimmed.unicodeScalars.contains(where: { $0.value < 0x20 }) else { return nil }
        return trimmed
    }
}
