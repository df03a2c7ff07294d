import DevtrustEncoding
import DevtrustURL
import DevtrustTestSupport
import Testing

/// RFC 3986 reference resolution, checked against the RFC's own examples and,
/// for many generated references, against the rfc3986 Python package (python3-rfc3986;
/// urllib's urljoin is not used: it drops empty segments and leaves network paths as they are).
struct URLReferenceTests {
    static let base = "http://a/b/c/d;p?q"

    /// Section 5.4.1 and 5.4.2, as the RFC gives them (strict parser: "http:g" keeps its scheme).
    static let examples: [(String, String)] = [
        ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"), ("/g", "http://a/g"),
        ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"), ("#s", "http://a/b/c/d;p?q#s"),
        ("g#s", "http://a/b/c/g#s"), ("g?y#s", "http://a/b/c/g?y#s"), (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y#s"), ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"),
        ("..", "http://a/b/"), ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."), ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"), ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"), ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"), ("g#s/./x", "http://a/b/c/g#s/./x"), ("g#s/../x", "http://a/b/c/g#s/../x"),
        ("http:g", "http:g"),
    ]

    @Test func theRFCsExamplesResolveAsTheRFCSays() {
        for (reference, expected) in Self.examples {
            #expect(URLReference.resolve(reference, against: Self.base) == expected, "\(reference)")
        }
    }

    /// The forms an identity server sends, from the answers' URLs devtrust posts to.
    @Test func theServersLinkFormsResolveBelowTheTenant() {
        let authorize = "https://idp.example/t/acme/oauth2/authorize"
        #expect(URLReference.resolve("/t/acme/oauth2/authn", against: authorize) == "https://idp.example/t/acme/oauth2/authn")
        #expect(URLReference.resolve("authn", against: authorize) == "https://idp.example/t/acme/oauth2/authn")
        #expect(URLReference.resolve("/oauth2/authn", against: "https://idp.example:9443/oauth2/authorize") == "https://idp.example:9443/oauth2/authn")
        #expect(URLReference.resolve("https://idp.example/oauth2/authn", against: authorize) == "https://idp.example/oauth2/authn")
        #expect(URLReference.resolve("//evil.example/oauth2/authn", against: authorize) == "https://evil.example/oauth2/authn")
    }

    /// References built from path pieces, queries and fragments: devtrust and rfc3986 agree on each.
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func generatedReferencesResolveAsAnIndependentImplementationDoes() throws {
        // No percent-encoding: rfc3986 also normalises its case, which is not resolution.
        let pieces = ["..", ".", "g", "h;x", "a.b", ".g", "g.."]
        let bases = ["http://a/b/c/d;p?q", "https://idp.example:9443/t/acme/oauth2/authorize", "https://h/", "http://127.0.0.1:8080/x/y/"]
        var generator = SystemRandomNumberGenerator()
        var cases = [(String, String)]()
        for _ in 0..<600 {
            // rfc3986 departs from the RFC for empty segments ("//" in a path), an empty base path
            // and references with a scheme but no authority: those are left out (the RFC's own
            // examples above cover them).
            var reference = (0..<Int.random(in: 0...4, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined(separator: "/")
            switch Int.random(in: 0..<6, using: &generator) {
            case 0: reference = "/" + reference
            case 1: reference = "//h2" + (reference.isEmpty ? "" : "/" + reference)
            default: break
            }
            if Bool.random(using: &generator) { reference += "?y=" + pieces.randomElement(using: &generator)! }
            if Int.random(in: 0..<4, using: &generator) == 0 { reference += "#f" }
            cases.append((reference, bases.randomElement(using: &generator)!))
        }
        let input = JSONWriter.string(.array(cases.map { .array([.string($0.0), .string($0.1)]) }))
        let script = """
            import json, sys, rfc3986
            print(json.dumps([rfc3986.uri_reference(r).resolve_with(rfc3986.uri_reference(b), strict=True).unsplit()
                              for r, b in json.load(sys.stdin)]))
            """
        let result = try ExternalTool.python.run(["-c", script], stdin: Array(input.utf8))
        #expect(result.status == 0, "\(result.stderr)")
        let python = try #require(try JSONParser.parse(result.stdout).arrayValue).map { $0.stringValue ?? "" }
        #expect(python.count == cases.count)
        for ((reference, base), expected) in zip(cases, python) {
            #expect(URLReference.resolve(reference, against: base) == expected, "\(reference) against \(base)")
        }
    }
}
