import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE

enum SignChallengeCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "sign-challenge", summary: "sign a base64url challenge (DER ECDSA-SHA256, standard base64)",
                                      positionalUsage: "[CHALLENGE|-]", maximumPositionals: 1, options: [])

        /// The operand: the challenge, or `-` for stdin.
        var challenge: String?

        init(_ values: OptionValues<Self>) {
            challenge = values.positionals.first
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let argument = options.challenge ?? "-"
        if argument == "-" && context.terminal.inputIsTerminal && options.challenge == nil {
            throw UsageError("give the challenge as an argument, or pipe it in with `-`", command: "sign-challenge")
        }
        let challenge = try context.textArgument(argument, name: "the challenge", limit: 65_536)
        let bytes: [UInt8]
        do {
            bytes = try Base64URL.decode(challenge, padding: .optional)
        } catch {
            throw UsageError("the challenge is not base64url (padded or not): \(error)", command: "sign-challenge")
        }
        guard !bytes.isEmpty else { throw UsageError("the challenge is empty", command: "sign-challenge") }
        if let refusal = ChallengePolicy.refusal(bytes) {
            throw UsageError("devtrust refuses to sign this challenge: \(refusal)", command: "sign-challenge")
        }
        let store = try context.deviceStore()
        let signature = try SigningDeadline.command(context, doing: "signing the challenge").bounding {
            try store.loadKey().key.sign(message: bytes)
        }
        let encoded = Base64.encode(signature.der)
        context.output(context.json ? JSONWriter.string(.object(["signature": .string(encoded)])) : encoded)
    }
}
