import DevtrustEncoding

/// The agent's wire protocol (docs/security.md, "The system agent"): over a Unix stream socket,
/// one request and one reply per connection. Each is a frame: its length as 4 bytes big-endian,
/// then that many bytes of one JSON object in UTF-8. Every frame is bounded (a request
/// `maximumRequestBytes`, a reply `maximumReplyBytes`), and so is the time a connection may take
/// (`AgentLimits`): the agent never reads more than one request's bound from anyone, nor waits on
/// anyone beyond their deadline.
public enum AgentWire {
    /// The protocol's version, in every request (`"v"`): an agent refuses another.
    public static let version: Int64 = 1
    /// A request's largest JSON: claims and a challenge fit in a small fraction of it.
    public static let maximumRequestBytes = 64 * 1024
    /// A reply's largest JSON (a status with every registration a user may have fits many times).
    public static let maximumReplyBytes = 256 * 1024
    static let headerBytes = 4

    /// `value` as one frame.
    public static func frame(_ value: JSONValue) -> [UInt8] {
        let body = JSONWriter.bytes(value)
        let count = UInt32(body.count)
        return [UInt8(count >> 24), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)] + body
    }
}

/// One frame read from bytes as they arrive, bounded: `state` says as soon as the header does
/// that the frame is larger than the bound, without waiting for (or keeping) its bytes.
public struct FrameReader: Sendable {
    public enum State: Equatable, Sendable {
        /// Not all of it yet.
        case incomplete
        /// The frame's JSON bytes, and whether more bytes followed it (one frame per connection).
        case complete([UInt8], trailing: Bool)
        /// The header announces `length` bytes, more than the bound.
        case tooLarge(length: UInt32)
        /// The header announces an empty frame: no JSON object is empty.
        case empty
    }

    public let limit: Int
    private(set) var buffer: [UInt8] = []

    public init(limit: Int) {
        self.limit = limit
    }

    /// How many more bytes to read at most: what the frame still needs, plus one to see trailing bytes.
    public var wanted: Int {
        guard let length = announced else { return AgentWire.headerBytes - buffer.count }
        return max(0, min(Int(length), limit) + AgentWire.headerBytes + 1 - buffer.count)
    }

    public var bufferedCount: Int { buffer.count }

    private var announced: UInt32? {
        guard buffer.count >= AgentWire.headerBytes else { return nil }
        return UInt32(buffer[0]) << 24 | UInt32(buffer[1]) << 16 | UInt32(buffer[2]) << 8 | UInt32(buffer[3])
    }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    public var state: State {
        guard let length = announced else { return .incomplete }
        if length == 0 { return .empty }
        if length > UInt32(limit) { return .tooLarge(length: length) }
        let end = AgentWire.headerBytes + Int(length)
        guard buffer.count >= end else { return .incomplete }
        return .complete(Array(buffer[AgentWire.headerBytes..<end]), trailing: buffer.count > end)
    }
}
