import DevtrustEncoding
import DevtrustSystem

/// `firewall`: true when the active nftables ruleset has an input chain whose
/// policy drops. Reading it needs root (CAP_NET_ADMIN) and a subprocess, so
/// it is only tried as root, and its answer is cached (see PostureCache).
enum FirewallCollector {
    static func collect(_ input: PostureInput) -> Attribute {
        guard input.root.isEmpty else { return .absent("firewall", "not read from a fixture tree") }
        guard input.effectiveUserID == 0 else {
            return .absent("firewall", "the active ruleset can only be read as root (the system agent, /var/lib/devtrust)")
        }
        guard let nft = ["/usr/sbin/nft", "/sbin/nft"].first(where: FileReader.exists) else {
            return .absent("firewall", "nft is not installed")
        }
        let result: SubprocessResult
        do {
            result = try Subprocess.run([nft, "-j", "list", "ruleset"], timeoutMilliseconds: 2000, outputLimit: 4 << 20)
        } catch {
            return .absent("firewall", "\(error)")
        }
        guard result.status == 0, let document = try? JSONParser.parse(result.output) else {
            return .absent("firewall", "nft -j list ruleset failed (exit \(result.status))")
        }
        return verdict(document)
    }

    /// A base chain hooked at input with policy drop means unsolicited traffic is refused.
    static func verdict(_ document: JSONValue) -> Attribute {
        let entries = document.objectValue?["nftables"]?.arrayValue ?? []
        var inputChains = [String]()
        for entry in entries {
            guard let chain = entry.objectValue?["chain"]?.objectValue, chain["hook"]?.stringValue == "input" else { continue }
            let name = "\(chain["family"]?.stringValue ?? "?") \(chain["table"]?.stringValue ?? "?") \(chain["name"]?.stringValue ?? "?")"
            if chain["policy"]?.stringValue == "drop" {
                return Attribute(name: "firewall", value: "true", source: "nftables input chain \(name) has policy drop")
            }
            inputChains.append(name)
        }
        return .absent("firewall", inputChains.isEmpty ? "no nftables input chain is active" : "no input chain drops by policy (\(inputChains.joined(separator: ", ")))")
    }
}
