import DevtrustConfig
import DevtrustEncoding
import DevtrustSystem
import Glibc

/// `config.valid`: the configuration file in effect (`--config`, DEVTRUST_CONFIG,
/// then the XDG and /etc defaults) loads as every command loads it, and each
/// sign-in profile in it is one `login --profile` accepts.
package struct ConfigurationDiagnosis {
    package static let id = "config.valid"
    package static let title = "configuration file"

    package let loader: ConfigurationLoader
    /// Why `login --profile NAME` refuses a profile of `configuration`, or nil when it takes it.
    package let profileProblem: (_ configuration: Configuration, _ name: String) -> (detail: String, fix: String?)?
    package let userID: UInt32

    /// The check, and the configuration the other checks use (the defaults when the file cannot be used).
    package func run() -> (check: DoctorCheck, configuration: Configuration) {
        guard let location = loader.location() else {
            return (DoctorCheck(Self.id, Self.title, .pass, "no configuration file; the built-in defaults apply"), Configuration())
        }
        let configuration: Configuration
        do {
            configuration = try loader.load()
        } catch {
            return (DoctorCheck(Self.id, Self.title, .fail, detail(error), fix: fix(error, required: location.required)), Configuration())
        }
        let refused = configuration.signInProfiles.keys.sorted().compactMap { name in profileProblem(configuration, name).map { (name, $0) } }
        if !refused.isEmpty {
            let details = refused.map { "sign-in profile \"\($0.0)\": \($0.1.detail)" }
            let fixes = refused.map { "correct profile \"\($0.0)\" in \(location.path)" + ($0.1.fix.map { " (\($0))" } ?? "") }
            return (DoctorCheck(Self.id, Self.title, .fail, "\(location.path) loads, but `devtrust login --profile` refuses " + DoctorText.joined(details),
                                fix: fixes.joined(separator: "; ")), configuration)
        }
        let profiles = configuration.signInProfiles.count
        let detail = "\(location.path) is valid" + (profiles > 0 ? " (\(profiles) sign-in profile\(profiles == 1 ? "" : "s"))" : "")
        return (DoctorCheck(Self.id, Self.title, .pass, detail), configuration)
    }

    /// The loader's message; for a file that is not JSON, with the line and column
    /// the parser stopped at (its message gives the byte).
    private func detail(_ error: ConfigError) -> String {
        if case .unreadable = error.problem, Self.isDirectory(error.file) { return "\(error.file), the configuration file in effect, is a directory" }
        guard case .notJSON = error.problem, let position = Self.parsePosition(ofFile: error.file) else { return error.description }
        return error.description + " (line \(position.line), column \(position.column))"
    }

    /// - Parameter required: the file is named (--config, DEVTRUST_CONFIG): with it gone, every command
    ///   fails; a default location's file can be moved aside.
    private func fix(_ error: ConfigError, required: Bool) -> String {
        let file = shellQuoted(error.file)
        let other = required ? "or stop naming it (--config, DEVTRUST_CONFIG)"
            : "or move it aside (then " + (error.file.hasPrefix("/etc/") ? "the built-in defaults apply" : "/etc/devtrust/config.json applies if there is one, else the built-in defaults") + ")"
        switch error.problem {
        case .notFound:
            return "create \(error.file), or stop naming it (--config, DEVTRUST_CONFIG)"
        case .unreadable:
            if Self.isDirectory(error.file) {
                return required ? "point --config (or DEVTRUST_CONFIG) at the configuration file, not a directory" : "remove the directory \(file) (a file belongs there)"
            }
            if let owner = Self.owner(of: error.file), owner != userID, userID != 0 {
                // Only its owner (or root) can change its mode; a configuration holds no secret.
                let who = getpwuid(owner).map { "\(String(cString: $0.pointee.pw_name)) (uid \(owner))" } ?? "uid \(owner)"
                return "it belongs to \(who), and you may not read it: its owner makes it readable for everyone (sudo chmod a+r \(file): a configuration holds no secret), \(other)"
            }
            return "make it readable (chmod u+r \(file)), \(other)"
        case .untrusted:
            return "chmod go-w \(file), and give it to you or root (chown) if another user owns it"
        case .notJSON:
            let line = Self.parsePosition(ofFile: error.file).map { "line \($0.line) of " } ?? ""
            return "correct \(line)\(error.file) (docs/configuration.md), \(other)"
        case let .field(fieldError):
            if fieldError.path == "(top level)" {
                return "make \(error.file) one JSON object at its top level ({...}; docs/configuration.md), \(other)"
            }
            return "correct \"\(fieldError.path)\" in \(error.file) (docs/configuration.md), \(other)"
        }
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    private static func owner(of path: String) -> UInt32? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_uid : nil
    }

    /// Where JSON parsing of the file stops, counted in lines and columns (from 1).
    package static func parsePosition(ofFile path: String) -> (line: Int, column: Int)? {
        guard let bytes = try? FileReader.read(path) else { return nil }
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return position(ofByte: error.offset, in: bytes)
        }
    }

    package static func position(ofByte offset: Int, in bytes: [UInt8]) -> (line: Int, column: Int) {
        let before = bytes.prefix(max(0, min(offset, bytes.count)))
        let line = before.filter { $0 == 0x0A }.count + 1
        let lineStart = before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
        return (line, before.count - lineStart + 1)
    }
}
