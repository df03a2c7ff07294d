import DevtrustEncoding
import DevtrustErrors

extension RepeatableOption {
    /// `--claim NAME=VALUE`, read with `ClaimOption.parse(_:command:)`.
    static var claim: Self { Self("claim", "NAME=VALUE", .text, "add a string claim (repeatable)") }
}

enum ClaimOption {
    /// `--claim NAME=VALUE` options, checked before anything is read from disk: the claims
    /// `DeviceAttributesForKey` adds last (`token`, `device-data`, `register`).
    static func parse(_ options: [String], command: String) throws(UsageError) -> [(String, String)] {
        var claims = [(String, String)]()
        for option in options {
            guard let equals = option.firstIndex(of: "=") else {
                throw UsageError("--claim takes NAME=VALUE, got \"\(option)\"", command: command)
            }
            let name = String(option[..<equals])
            if let problem = ClaimName.givenClaimProblem(with: name) {
                throw UsageError("--claim \(name): \(problem)", command: command)
            }
            claims.append((name, String(option[option.index(after: equals)...])))
        }
        return claims
    }
}
