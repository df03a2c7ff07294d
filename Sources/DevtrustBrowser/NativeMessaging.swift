import DevtrustEncoding
import DevtrustTerminal

/// The browsers' native messaging protocol on the host's side: each message is
/// a 4-byte length in the machine's byte order, then that many bytes of UTF-8
/// JSON, on stdin from the browser and on stdout to it.
package struct NativeMessagingChannel {
    /// What the host reads at most in one message: 1 MiB, as the browsers allow a host's replies
    /// (Chromium sends the host larger ones; nothing devtrust is asked needs them).
    package static let maximumIncomingBytes = 1 << 20
    /// What a browser takes at most in one reply (Chromium and Firefox: 1 MiB).
    package static let maximumOutgoingBytes = 1 << 20

    package enum Incoming: Equatable {
        case message([UInt8])
        /// Standard input ended between messages: the browser is done.
        case end
        /// Standard input ended inside a message (after `received` of its bytes, length prefix included).
        case truncated(received: Int)
        /// A length past `maximumIncomingBytes`; the message is not read.
        case tooLarge(length: UInt32)
    }

    /// The process's standard streams (or a test's): stdin from the browser, stdout to it.
    package let terminal: any Terminal

    package init(terminal: any Terminal) {
        self.terminal = terminal
    }

    package func receive() -> Incoming {
        let prefix = read(4)
        if prefix.isEmpty { return .end }
        guard prefix.count == 4 else { return .truncated(received: prefix.count) }
        let length = prefix.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        guard length <= Self.maximumIncomingBytes else { return .tooLarge(length: length) }
        let body = read(Int(length))
        guard body.count == Int(length) else { return .truncated(received: 4 + body.count) }
        return .message(body)
    }

    /// False when the browser no longer reads (stdout closed).
    package func send(_ message: JSONValue) -> Bool {
        send(bytes: JSONWriter.bytes(message))
    }

    package func send(bytes body: [UInt8]) -> Bool {
        terminal.writeOutputBytes(Self.frame(body))
    }

    /// The body with its length before it, in the machine's byte order.
    package static func frame(_ body: [UInt8]) -> [UInt8] {
        var length = UInt32(body.count)
        return withUnsafeBytes(of: &length) { Array($0) } + body
    }

    /// `count` bytes, or fewer when standard input ends first.
    private func read(_ count: Int) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(count)
        while bytes.count < count {
            let chunk = terminal.readInputBytes(upTo: min(count - bytes.count, 65_536))
            if chunk.isEmpty { break }
            bytes += chunk
        }
        return bytes
    }
}
