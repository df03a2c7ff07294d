import DevtrustEncoding
import Glibc

/// POSIX extended regular expressions (regcomp), for the server's input rules.
/// The server's patterns are Java's; only those that mean the same in POSIX
/// ERE (no backslash escapes, no `(?` groups) are checked here. The others,
/// and any pattern that does not compile, are left to the server.
enum RegularExpressionMatcher {
    static func matches(_ pattern: String, _ value: String) -> Bool {
        guard !pattern.includes("\\"), !pattern.includes("(?") else { return true }
        var expression = regex_t()
        guard regcomp(&expression, "^(" + pattern + ")$", REG_EXTENDED | REG_NOSUB) == 0 else { return true }
        defer { regfree(&expression) }
        return regexec(&expression, value, 0, nil, 0) == 0
    }
}
