import DevtrustCore
import DevtrustEncoding
import DevtrustPosture

/// `attributes`: the device attributes tokens carry, as JSON; `--explain`
/// shows each one's value (or null) and where it came from.
enum AttributesCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let explain = FlagOption<Self>("explain", "show where each value came from, and why some are left out")
        static let spec = CommandSpec(name: "attributes", summary: "show the device attributes tokens carry (JSON)", options: [explain])

        var explain: Bool

        init(_ values: OptionValues<Self>) {
            explain = values[Self.explain]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let configuration = try context.configuration()
        let deviceTokens = try context.deviceTokens(configuration)
        let backend = try deviceTokens.store.state().key?.backend
        let report = deviceTokens.posture(backend: backend)
        let attributes = try deviceTokens.attributes().attributes(posture: report)
        guard options.explain else {
            context.output(JSONWriter.pretty(.object(attributes.claims)))
            return
        }
        var explained = JSONObject()
        explained["platform"] = .object(["value": .string(configuration.platform),
                                         "source": .string(configuration.source.map { "platform in \($0)" } ?? "devtrust's default")])
        for attribute in report.attributes {
            explained[attribute.name] = .object(["value": attribute.value.map { .string($0) } ?? .null, "source": .string(attribute.source)])
        }
        for (name, value) in configuration.claims {
            explained[name] = .object(["value": .string(value), "source": .string("claims in \(configuration.source ?? "the configuration")")])
        }
        context.output(JSONWriter.pretty(.object(explained)))
    }
}
