import DevtrustDevice
import DevtrustEncoding

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
        let device = try context.deviceStore().loadKey()
        let publicKey = device.key.publicKey
        switch format {
        case .pem: context.output(publicKey.pem)
        case .jwk: context.output(JSONWriter.string(.object(publicKey.jwk)))
        case .thumbprint: context.output(publicKey.thumbprint)
        case .spki: context.output(publicKey.spkiBase64)
        }
    }
}
