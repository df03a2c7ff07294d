import DevtrustAgent
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
        let der: [UInt8]
        switch try context.deviceAccess(command: Options.spec.name) {
        case let .agent(agent):
            // The agent decides what it signs (the same guard, applied there): this side checks only the syntax.
            _ = try ChallengePolicy.decodedChallenge(challenge)
            guard challenge.utf8.count <= AgentRequest.maximumSignedChallengeLength else {
                throw UsageError("through the devtrust agent, a challenge is at most \(AgentRequest.maximumSignedChallengeLength) characters of base64url",
                                 command: Options.spec.name)
            }
            if context.verbose { context.detail("the device key: the devtrust agent at \(agent.socket) (it applies the challenge guard itself)") }
            der = try agent.signChallenge(challenge)
        case .keystore:
            let bytes = try ChallengePolicy.signableChallenge(challenge)
            let store = try context.deviceStore()
            der = try SigningDeadline.command(context, doing: "signing the challenge").bounding {
                try store.loadKey().key.sign(message: bytes)
            }.der
        }
        let encoded = Base64.encode(der)
        context.output(context.json ? JSONWriter.string(.object(["signature": .string(encoded)])) : encoded)
    }
}
