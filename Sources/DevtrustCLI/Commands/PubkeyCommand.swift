import DevtrustDevice
import DevtrustEncoding

enum PubkeyCommand {
    static func run(_ context: CommandContext) throws {
        let format = context.arguments.value("format") ?? "spki"
        guard ["spki", "pem", "jwk", "thumbprint"].contains(format) else {
            throw UsageError("--format must be spki, pem, jwk or thumbprint, not \"\(format)\"", command: "pubkey")
        }
        let device = try context.deviceStore().loadKey()
        let publicKey = device.key.publicKey
        switch format {
        case "pem": context.output(publicKey.pem)
        case "jwk": context.output(JSONWriter.string(.object(publicKey.jwk)))
        case "thumbprint": context.output(publicKey.thumbprint)
        default: context.output(publicKey.spkiBase64)
        }
    }
}
