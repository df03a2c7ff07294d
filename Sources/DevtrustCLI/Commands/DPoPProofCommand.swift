import DevtrustAgent
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustHTTP
import DevtrustJOSE

/// `dpop-proof`: a DPoP proof (RFC 9449) for a request to a resource with the stored sign-in's
/// access token (`ath` is its hash). On the path of `token`: no HTTP, no refresh; run
/// `devtrust access-token` first, as the curl recipe in docs/sign-in.md does.
enum DPoPProofCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let method = ValueOption<Self>("method", "METHOD", .text, "the request's HTTP method (GET, POST, ...)")
        static let url = ValueOption<Self>("url", "URL", .url, "the resource request's URL (htu is this without query and fragment, scheme and host in lower case, without a default port)")
        static let nonce = ValueOption<Self>("nonce", "NONCE", .text, "the resource server's DPoP-Nonce, kept for the URL's origin (default: the latest one devtrust was given there, if any)")
        static let server = ValueOption<Self>("server", "URL|NAME", .url, "the sign-in with this server")
        static let discovery = ValueOption<Self>("discovery", "URL", .url, "the sign-in with this provider")
        static let spec = CommandSpec(name: "dpop-proof", summary: "print a DPoP proof for a resource request with the stored sign-in's access token",
                                      options: [method, url, nonce, server, discovery], required: [.option(method), .option(url)])

        var method: String
        var url: String
        var nonce: String?
        var server: String?
        var discovery: String?

        init(_ values: OptionValues<Self>) {
            method = values[Self.method] ?? ""
            url = values[Self.url] ?? ""
            nonce = values[Self.nonce]
            server = values[Self.server]
            discovery = values[Self.discovery]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        // RFC 9110 5.6.2: a method is a token; 16 characters is more than any method has.
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        guard (1...16).contains(options.method.count), options.method.allSatisfy(tokenCharacters.contains) else {
            throw UsageError("--method must be an HTTP method such as GET or POST", command: Options.spec.name)
        }
        // Methods are case-sensitive (RFC 9110 9.1) and servers compare htm with theirs, which is upper case:
        // a proof with htm "get" would be refused at the resource, so it is refused here with the fix.
        guard options.method == options.method.uppercased() else {
            throw UsageError("--method \(options.method) is not upper case: HTTP methods are case-sensitive and a server would refuse the proof; use --method \(options.method.uppercased())",
                             command: Options.spec.name)
        }
        if let reason = unusableReason(options.url) {
            throw UsageError("--url \(TransportPolicy.redacted(options.url, keepingQuery: true)) is not a usable resource URL: \(reason)", command: Options.spec.name)
        }
        if let nonce = options.nonce, !DPoPProofMinter.isValidNonce(nonce) {
            throw UsageError("--nonce must be the DPoP-Nonce header's value (1 to \(DPoPProofMinter.maximumNonceLength) characters of printable ASCII other than space, \" and \\)",
                             command: Options.spec.name)
        }
        // The sign-in is in your own keystore, with or without the agent.
        let store = try context.deviceStore()
        let proof: String, jkt: String
        switch try context.deviceAccess(command: Options.spec.name) {
        case let .agent(agent):
            // The agent writes the proof (header and claims) with the machine key; this side sends the method, URL, nonce and the token's hash.
            (proof, jkt) = try context.dpopKey.proof(signIns: store, method: options.method, url: options.url, nonce: options.nonce,
                                                     server: options.server, discovery: options.discovery) { AgentDPoPProofs(agent: agent, boundTo: $0) }
        case .keystore:
            // A TPM that never answers must not hold a script's $(devtrust dpop-proof) for ever, as for token.
            (proof, jkt) = try SigningDeadline.command(context, doing: "loading the device key and signing the proof").bounding {
                try context.dpopKey.proof(store: store, method: options.method, url: options.url, nonce: options.nonce,
                                          server: options.server, discovery: options.discovery)
            }
        }
        context.output(context.json ? JSONWriter.string(.object(["proof": .string(proof), "jkt": .string(jkt)])) : proof)
    }

    /// Why `url` is no URL devtrust would send a request to (ServerURL's rules: https, or http to loopback), or nil.
    static func unusableReason(_ url: String) -> String? {
        do {
            _ = try ServerURL(DPoPProofMinter.targetURI(url))
            return nil
        } catch {
            switch error {
            case let .invalidURL(_, reason): return reason
            case .insecureURL: return "plain http goes only to loopback addresses; use https://"
            default: return error.description
            }
        }
    }
}
