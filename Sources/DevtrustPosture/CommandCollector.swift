import DevtrustEncoding
import DevtrustSystem

/// The administrator's own collector: a program that prints one flat JSON
/// object of strings. A failure is reported and skipped, never fatal.
enum CommandCollector {

    static func collect(_ command: [String], timeoutMilliseconds: Int) -> (attributes: [Attribute], problem: String?) {
        let program = command.first ?? ""
        if let problem = FileTrust.problem(path: program) {
            return ([], "posture collector \(program) \(problem), so devtrust does not run it (it must belong to root or you and be writable only by its owner, in a directory only they can write to); its claims are left out")
        }
        let result: SubprocessResult
        do {
            result = try Subprocess.run(command, timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            return ([], "posture collector: \(error); its claims are left out")
        }
        guard result.status == 0 else {
            return ([], "posture collector \(program) exited with \(result.status); its claims are left out")
        }
        guard case let .object(object)? = try? JSONParser.parse(result.output) else {
            return ([], "posture collector \(program) did not print a JSON object; its claims are left out")
        }
        var attributes = [Attribute]()
        var skipped = [String]()
        for member in object.members {
            guard case let .string(value) = member.value, ClaimName.problem(with: member.key) == nil else {
                skipped.append(member.key)
                continue
            }
            attributes.append(Attribute(name: member.key, value: value, source: "printed by \(program)"))
        }
        let problem = skipped.isEmpty ? nil : "posture collector \(program): skipped \(skipped.joined(separator: ", ")) (values must be strings; jti, iat and attestationToken are reserved)"
        return (attributes, problem)
    }
}
