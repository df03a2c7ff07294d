import DevtrustEncoding
import DevtrustPosture

/// `attributes`: the device attributes tokens carry, as JSON; `--explain`
/// shows each one's value (or null) and where it came from.
enum AttributesCommand {
    static func run(_ context: CommandContext) throws {
        let configuration = try context.configuration()
        let store = try context.deviceStore()
        let backend = try store.state().key?.backend.rawValue
        let report = TokenCommands.posture(context, configuration, backend: backend)
        let attributes = TokenCommands.deviceAttributes(configuration, claims: [], posture: report)
        guard context.arguments.has("explain") else {
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
