import Foundation

/// The browser extension's timing constants (browser/background.js), as shipped or as a
/// test copy of browser/ has them. Waiting on the shipped ones made the real-browser
/// suite last 10 to 14 minutes (issue 27); the tests that wait on one run a copy with
/// shorter ones (HeadlessBrowser.Extension.timers), the others browser/ as it ships.
public struct ExtensionTimers: Sendable, Equatable, CustomStringConvertible {
    public var pendingMilliseconds: Int
    public var bypassMilliseconds: Int
    public var tokenWindowMilliseconds: Int
    public var hostTimeoutMilliseconds: Int
    public var refreshMinutes: Double

    public init(pendingMilliseconds: Int, bypassMilliseconds: Int, tokenWindowMilliseconds: Int,
                hostTimeoutMilliseconds: Int, refreshMinutes: Double) {
        self.pendingMilliseconds = pendingMilliseconds
        self.bypassMilliseconds = bypassMilliseconds
        self.tokenWindowMilliseconds = tokenWindowMilliseconds
        self.hostTimeoutMilliseconds = hostTimeoutMilliseconds
        self.refreshMinutes = refreshMinutes
    }

    /// The timers of the browser tests' copy. Shorter only where a test waits for a timer to
    /// fire; where a test relies on one NOT firing, with room for a loaded machine (measured
    /// idle and beside stress-ng --cpu 2 on 2 cores, where the spans below barely changed):
    /// - refreshMinutes 0.1 (1 shipped): the periodic config check, which a new registration
    ///   waits for. Not the browsers' limit: Chromium with --load-extension (unpacked) and
    ///   Firefox (the add-on from the profile) both fired a 0.05-minute alarm every 3 s; the
    ///   30 s minimum of Chromium's documentation holds for packed extensions. The limit is
    ///   aNewRegistrationAndAReset...: after the check that brought the registration, the
    ///   test's reset and the navigations that must still find the endpoint (0.2 to 0.5 s)
    ///   have to come before the next check, which drops it: 6 s. aHostThatIsSlow... keeps
    ///   the shipped period (it says why).
    /// - hostTimeoutMilliseconds 5 s (10 s shipped): a host that hangs is waited for this long.
    ///   Every other answer must come within it: a freshly started host's first (python proxy,
    ///   devtrust, discovery: 0.2 s) and a "slow" one (failingHost's delay, 1.5 s here: the
    ///   shipped 3 of 10 s), with 3.5 s to spare.
    /// - tokenWindowMilliseconds 10 s (20 s shipped): the 7 token requests of one tab in
    ///   aHostThatIsSlow... must never all fall within one window (the 7th would get none);
    ///   between the first and the last come the slow answer and two host timeouts, at least
    ///   11.5 s (about 15 s measured). A looping server's 7 rounds take 0.6 s.
    /// - pendingMilliseconds and bypassMilliseconds as shipped (30 s, 10 s): no test waits for
    ///   them to lapse, and each needs them not to (a continue page, a navigation late under
    ///   load): shorter ones would only add races.
    public static let forTests = ExtensionTimers(pendingMilliseconds: 30_000, bypassMilliseconds: 10_000,
                                                 tokenWindowMilliseconds: 10_000, hostTimeoutMilliseconds: 5_000,
                                                 refreshMinutes: 0.1)

    /// The timers browser/background.js ships with.
    public static func shipped() throws -> ExtensionTimers {
        let text = try String(contentsOfFile: Repository.path("browser/background.js"), encoding: .utf8)
        var values = [String: Double]()
        for name in names {
            let literal = try declaration(of: name, in: text).value
            guard let value = Double(literal.replacingOccurrences(of: "_", with: "")) else {
                throw FixtureError("background.js: \(name) is not a number: \(literal)")
            }
            values[name] = value
        }
        return ExtensionTimers(pendingMilliseconds: Int(values["PENDING_MILLISECONDS"]!), bypassMilliseconds: Int(values["BYPASS_MILLISECONDS"]!),
                               tokenWindowMilliseconds: Int(values["TOKEN_WINDOW_MILLISECONDS"]!),
                               hostTimeoutMilliseconds: Int(values["HOST_TIMEOUT_MILLISECONDS"]!), refreshMinutes: values["REFRESH_MINUTES"]!)
    }

    /// A timer in seconds as the extension prints it (`ms / 1000` in JavaScript: "20", "2.5").
    public static func seconds(_ milliseconds: Int) -> String {
        milliseconds % 1000 == 0 ? String(milliseconds / 1000) : String(Double(milliseconds) / 1000)
    }

    public var description: String {
        "pending \(pendingMilliseconds) ms, bypass \(bypassMilliseconds) ms, token window \(tokenWindowMilliseconds) ms, "
            + "host timeout \(hostTimeoutMilliseconds) ms, refresh \(refreshMinutes) min"
    }

    /// The constants' names in background.js, each with its value here as a JavaScript literal.
    var literals: [(name: String, value: String)] {
        [("PENDING_MILLISECONDS", String(pendingMilliseconds)), ("BYPASS_MILLISECONDS", String(bypassMilliseconds)),
         ("TOKEN_WINDOW_MILLISECONDS", String(tokenWindowMilliseconds)),
         ("HOST_TIMEOUT_MILLISECONDS", String(hostTimeoutMilliseconds)), ("REFRESH_MINUTES", String(refreshMinutes))]
    }

    static let names = ExtensionTimers.forTests.literals.map(\.name)

    /// The one line `const NAME = VALUE;` of background.js (its range and VALUE). Anything
    /// else fails: no such line (the constant renamed, or declared another way), or NAME
    /// declared or assigned more than once, so that a copy never keeps a timer unreplaced.
    static func declaration(of name: String, in text: String) throws -> (range: Range<String.Index>, value: String) {
        let line = try NSRegularExpression(pattern: "^const \(name) = ([0-9][0-9_.]*);$", options: [.anchorsMatchLines])
        let anyUse = try NSRegularExpression(pattern: "\\b\(name)\\s*=[^=]")
        let whole = NSRange(text.startIndex..., in: text)
        let declarations = line.matches(in: text, range: whole)
        let assignments = anyUse.numberOfMatches(in: text, range: whole)
        guard declarations.count == 1, assignments == 1,
              let range = Range(declarations[0].range, in: text), let value = Range(declarations[0].range(at: 1), in: text) else {
            throw FixtureError("background.js: expected exactly one \"const \(name) = <number>;\" line and no other assignment of"
                               + " \(name); found \(declarations.count) such line(s), \(assignments) assignment(s). Renamed?"
                               + " Update ExtensionTimers (Tests/DevtrustTestSupport) with it.")
        }
        return (range, String(text[value]))
    }

    /// background.js with each timing constant's value replaced by this one's.
    public func applied(to text: String) throws -> String {
        var text = text
        for (name, value) in literals {
            let found = try Self.declaration(of: name, in: text)
            text.replaceSubrange(found.range, with: "const \(name) = \(value);")
        }
        return text
    }

    /// A copy of the repository's browser/ in `directory` (a test's temporary directory, never
    /// the repository), its background.js with these timers: every file as it is but that,
    /// and in that only the five declarations' values. Returns the copy's path.
    public func extensionCopy(in directory: String) throws -> String {
        let source = Repository.path("browser")
        let copy = directory + "/browser"
        try FileManager.default.copyItem(atPath: source, toPath: copy)
        let script = copy + "/background.js"
        let shipped = try String(contentsOfFile: script, encoding: .utf8)
        try Data(try applied(to: shipped).utf8).write(to: URL(fileURLWithPath: script))
        return copy
    }
}
