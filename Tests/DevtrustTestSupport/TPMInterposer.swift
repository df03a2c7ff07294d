import DevtrustEncoding
import Foundation

/// An active attacker on the TPM bus (Tests/Interop/tpm_interposer.py) between
/// a client and a swtpm: `swap-key` replaces a created key's public point with
/// the attacker's and forges its signatures, `swap-srk` answers for the storage
/// root key with the attacker's own, `refuse` answers given commands with an
/// error itself, `persist-first` wins a race to a persistent handle. Every
/// change it makes is a JSON line in its log.
public final class TPMInterposer: @unchecked Sendable {
    public let port: Int
    public let log: TemporaryDirectory
    private let process: ListeningProcess

    /// The TCTI configuration that goes through the interposer.
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// `arguments`: the mode's own options (`--refuse CC:RC`).
    public init(_ tpm: Swtpm, mode: String, attackerKey: String? = nil, arguments: [String] = []) throws {
        log = TemporaryDirectory("interposer")
        process = try ListeningProcess(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/tpm_interposer.py"), "--tpm-port", "\(tpm.port)", "--listen-port", "0",
                                                                      "--mode", mode, "--log", log.file("events.jsonl")] + (attackerKey.map { ["--attacker-key", $0] } ?? []) + arguments,
                                       what: "the TPM interposer")
        guard let port = Int(process.announced) else { throw SwtpmError("the TPM interposer announced \(process.firstLine)") }
        self.port = port
    }

    /// The events it logged, by name ("create-swapped", "sign-forged", "salt-recovered", ...).
    public func events() -> [JSONObject] {
        let text = (try? String(contentsOfFile: log.file("events.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)).objectValue }
    }

    public func events(named name: String) -> [JSONObject] {
        events().filter { $0["event"] == .string(name) }
    }

    /// The attacker's public key, standard base64 SPKI, as its first log line gives it.
    public var attackerPublicKey: String? {
        events(named: "started").first?["attacker_spki"]?.stringValue
    }
}
