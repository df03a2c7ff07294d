import DevtrustAgent
import DevtrustEncoding
import DevtrustKeys

enum PubkeyCommand: DevtrustCommand {
    enum Format: String, CaseIterable {
        case spki, pem, jwk, thumbprint
    }

    struct Options: CommandOptions {
        static let format = ChoiceOption<Self, Format>("format", "spki (default): standard base64 DER SubjectPublicKeyInfo")
        static let spec = CommandSpec(name: "pubkey", summary: "print the device's public key", options: [format])

        var format: String?

        init(_ values: OptionValues<Self>) {
            format = values[Self.format]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let format = try Options.format.choice(options.format) ?? .spki
        let publicKey: P256PublicKey
        switch try context.deviceAccess(command: Options.spec.name) {
        case let .agent(agent):
            publicKey = try agent.publicKey()
        case .keystore:
            publicKey = try context.deviceStore().loadKey().key.publicKey
        }
        if context.json {
            context.output(JSONWriter.string(.object(document(publicKey, format: format))))
            return
        }
        switch format {
        case .pem: context.output(publicKey.pem)
        case .jwk: context.output(JSONWriter.string(.object(publicKey.jwk)))
        case .thumbprint: context.output(publicKey.thumbprint)
        case .spki: context.output(publicKey.spkiBase64)
        }
    }

    /// `--json`: the key in the chosen format as `publicKey` (the JWK as an object),
    /// and its fingerprint (the RFC 7638 thumbprint), which is all `--format thumbprint` gives.
    static func document(_ publicKey: P256PublicKey, format: Format) -> JSONObject {
        var document = JSONObject()
        switch format {
        case .spki: document["publicKey"] = .string(publicKey.spkiBase64)
        case .pem: document["publicKey"] = .string(publicKey.pem)
        case .jwk: document["publicKey"] = .object(publicKey.jwk)
        case .thumbprint: break
        }
        document["fingerprint"] = .string(publicKey.thumbprint)
        return document
    }
}
