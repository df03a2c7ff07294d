import DevtrustConfig
import DevtrustEncoding
import DevtrustSystem

/// `config.valid`: the configuration file in effect (`--config`, DEVTRUST_CONFIG,
/// then the XDG and /etc defaults) loads as every command loads it.
struct ConfigurationDiagnosis {
    static let id = "config.valid"
    static let title = "configuration file"

    let loader: ConfigurationLoader

    /// The check, and the configuration the other checks use (the defaults when the file cannot be used).
    func run() -> (check: DoctorCheck, configuration: Configuration) {
        guard let location = loader.location() else {
            return (DoctorCheck(Self.id, Self.title, .pass, "no configuration file; the built-in defaults apply"), Configuration())
        }
        do {
            let configuration = try loader.load()
            let profiles = configuration.signInProfiles.count
            let detail = "\(location.path) is valid" + (profiles > 0 ? " (\(profiles) sign-in profile\(profiles == 1 ? "" : "s"))" : "")
            return (DoctorCheck(Self.id, Self.title, .pass, detail), configuration)
        } catch {
            return (DoctorCheck(Self.id, Self.title, .fail, detail(error), fix: fix(error)), Configuration())
        }
    }

    /// The loader's message; for a file that is not JSON, with the line and column
    /// the parser stopped at (its message gives the byte).
    private func detail(_ error: ConfigError) -> String {
        guard case .notJSON = error.problem, let position = Self.parsePosition(ofFile: error.file) else { return error.description }
        return error.description + " (line \(position.line), column \(position.column))"
    }

    private func fix(_ error: ConfigError) -> String {
        let file = shellQuoted(error.file)
        let aside = "or move it aside (the built-in defaults then apply)"
        switch error.problem {
        case .notFound:
            return "create \(error.file), or stop naming it (--config, DEVTRUST_CONFIG)"
        case .unreadable:
            return "make \(error.file) readable (chmod u+r \(file)), \(aside)"
        case .untrusted:
            return "chmod go-w \(file), and give it to you or root (chown) if another user owns it"
        case .notJSON:
            let line = Self.parsePosition(ofFile: error.file).map { "line \($0.line) of " } ?? ""
            return "correct \(line)\(error.file) (docs/configuration.md), \(aside)"
        case let .field(fieldError):
            return "correct \"\(fieldError.path)\" in \(error.file) (docs/configuration.md), \(aside)"
        }
    }

    /// Where JSON parsing of the file stops, counted in lines and columns (from 1).
    static func parsePosition(ofFile path: String) -> (line: Int, column: Int)? {
        guard let bytes = try? FileReader.read(path) else { return nil }
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return position(ofByte: error.offset, in: bytes)
        }
    }

    static func position(ofByte offset: Int, in bytes: [UInt8]) -> (line: Int, column: Int) {
        let before = bytes.prefix(max(0, min(offset, bytes.count)))
        let line = before.filter { $0 == 0x0A }.count + 1
        let lineStart = before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
        return (line, before.count - lineStart + 1)
    }
}
