import DevtrustEncoding
import DevtrustErrors
import DevtrustSystem

/// What a script gives for a flow's or a sign-in's steps instead of a person at
/// the prompt: `--inputs FILE|-` and `--input NAME=VALUE`; errors name the
/// command that was run (`register`, `login`).
enum ScriptedInputs {
    /// The two options as the command read them.
    struct Options {
        /// `--inputs FILE|-`
        var file: String?
        /// `--input NAME=VALUE`s, in order.
        var inputs: [String]
    }

    /// `--inputs FILE|-` (a JSON object of strings), then `--input NAME=VALUE`, which wins.
    static func read(_ options: Options, _ context: CommandContext, command: String) throws -> [String: String] {
        var values = [String: String]()
        if let source = options.file {
            let bytes: [UInt8]
            if source == "-" {
                guard let read = context.terminal.readInput(limit: 1 << 20) else { throw UsageError("--inputs on stdin is larger than 1 MiB", command: command) }
                bytes = read
            } else {
                do {
                    bytes = try FileReader.read(source)
                } catch {
                    throw UsageError("--inputs: \(error)", command: command)
                }
            }
            do {
                let reader = try JSONObjectReader(try JSONParser.parse(bytes), path: "")
                for member in reader.object.members {
                    guard case let .string(value) = member.value else {
                        throw JSONFieldError(path: member.key, kind: .invalidType(expected: "a string", found: member.value.kindDescription))
                    }
                    values[member.key] = value
                }
            } catch {
                throw UsageError("--inputs \(source): \(error) (it must be a JSON object whose values are all strings)", command: command)
            }
        }
        var exposed = [String]()
        for option in options.inputs {
            guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                throw UsageError("--input takes NAME=VALUE, got \"\(option.prefix(40))\"", command: command)
            }
            let name = String(option[..<equals])
            values[name] = String(option[option.index(after: equals)...])
            if looksSecret(name) { exposed.append(name) }
        }
        if !exposed.isEmpty {
            context.warn("--input \(exposed.joined(separator: ", ")): a command line is visible to every user of this machine (ps, /proc) while devtrust runs; give secrets with --inputs FILE, --inputs - (stdin) or at the prompt")
        }
        return values
    }

    /// Input names that usually carry a secret (passwords, one-time codes, PINs).
    static func looksSecret(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return ["password", "passwd", "passcode", "secret", "otp", "totp", "pin", "token"].contains { lowered.includes($0) }
            || lowered.hasSuffix("code")
    }
}
