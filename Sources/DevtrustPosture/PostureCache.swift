import DevtrustEncoding

/// Where results of slow collectors (subprocesses) are kept between tokens.
public protocol PostureCacheStore: Sendable {
    func read() -> [UInt8]?
    func write(_ bytes: [UInt8])
}

/// Cached attributes by collector name, with the time they were collected.
struct PostureCache {
    var entries: [String: (at: Int64, attributes: [Attribute])] = [:]

    init(_ bytes: [UInt8]?) {
        guard let bytes, case let .object(document)? = try? JSONParser.parse(bytes) else { return }
        for member in document.members {
            guard let entry = member.value.objectValue, let at = entry["at"]?.int64Value, let list = entry["attributes"]?.arrayValue else { continue }
            let attributes = list.compactMap { item -> Attribute? in
                guard let object = item.objectValue, let name = object["name"]?.stringValue, let source = object["source"]?.stringValue else { return nil }
                return Attribute(name: name, value: object["value"]?.stringValue, source: source)
            }
            entries[member.key] = (at, attributes)
        }
    }

    func fresh(_ name: String, now: Int64, maxAge: Int64) -> [Attribute]? {
        guard let entry = entries[name], now - entry.at >= 0, now - entry.at < maxAge else { return nil }
        return entry.attributes
    }

    var bytes: [UInt8] {
        var document = JSONObject()
        for name in entries.keys.sorted() {
            let entry = entries[name]!
            document[name] = .object([
                "at": .integer(entry.at),
                "attributes": .array(entry.attributes.map { attribute in
                    var object: JSONObject = ["name": .string(attribute.name), "source": .string(attribute.source)]
                    if let value = attribute.value { object["value"] = .string(value) }
                    return .object(object)
                }),
            ])
        }
        return JSONWriter.bytes(.object(document))
    }
}
