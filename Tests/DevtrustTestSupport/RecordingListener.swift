import DevtrustEncoding
import Foundation

/// A listener (Tests/Interop/recording_listener.py) that records every
/// connection that reaches it: `server` answers each request with 200 `{}`,
/// `proxy` answers 502 to whatever is sent through it (CONNECT or absolute-form).
public final class RecordingListener: @unchecked Sendable {
    public enum Mode: String, Sendable { case server, proxy }

    public let host: String
    public let port: Int
    private let log: TemporaryDirectory
    private let process: ListeningProcess

    /// "host:port", with brackets for IPv6.
    public var authority: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    public init(host: String, mode: Mode = .server) throws {
        self.host = host
        log = TemporaryDirectory("listener")
        process = try ListeningProcess(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/recording_listener.py"), "--host", host,
                                                                      "--mode", mode.rawValue, "--log", log.file("connections.jsonl")],
                                       what: "the recording listener on \(host)")
        guard let port = Int(process.announced) else { throw SwtpmError("the recording listener announced \(process.firstLine)") }
        self.port = port
    }

    /// What each connection sent first (request line, headers, the start of the body), in order.
    public func connections() -> [String] {
        let text = (try? String(contentsOfFile: log.file("connections.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)).objectValue?["head"]?.stringValue }
    }
}

/// This machine's own addresses outside loopback: where a request to a
/// "remote" host can be received by a test without any network.
public enum MachineAddress {
    /// The first IPv4 address of an interface that is up, outside 127.0.0.0/8 and 169.254.0.0/16.
    public static let nonLoopbackIPv4: String? = addresses(family: AF_INET).first { !$0.hasPrefix("127.") && !$0.hasPrefix("169.254.") }

    /// The first IPv6 address outside ::1, link-local and IPv4-mapped addresses.
    public static let nonLoopbackIPv6: String? = addresses(family: AF_INET6).first { $0 != "::1" && !$0.lowercased().hasPrefix("fe80") && !$0.contains(".") }

    /// Whether the tests that need one run: always on CI (where its absence must fail).
    public static var shouldRun: Bool { nonLoopbackIPv4 != nil || ExternalTool.isCI }

    static func addresses(family: Int32) -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var result = [String]()
        var entry = list
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            guard let address = current.pointee.ifa_addr, Int32(address.pointee.sa_family) == family,
                  current.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard getnameinfo(address, length, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            result.append(String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return result
    }
}
