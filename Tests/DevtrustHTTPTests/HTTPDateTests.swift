import DevtrustEncoding
import DevtrustHTTP
import DevtrustTestSupport
import Testing

/// The `Date` header, in the three forms RFC 9110 makes a recipient accept,
/// checked against Python's email.utils on random times.
struct HTTPDateTests {
    @Test func theRFCsExampleInEachForm() {
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            #expect(HTTPDate.parse(text) == 784_111_777, "\(text)")
        }
        for text in ["", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                     "Sun, 06 Nov 1994 08:49 GMT", "1994-11-06T08:49:37Z"] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
    }

    @Test(.enabled(if: ExternalTool.python.shouldRun)) func randomTimesReadAsPythonWritesThem() throws {
        let times = (0..<500).map { _ in Int64.random(in: 0...4_102_444_800) } + [951_782_400, 1_709_164_800, 4_107_542_399]
        let script = """
            import json, sys
            from email.utils import formatdate
            print(json.dumps([formatdate(t, usegmt=True) for t in json.load(sys.stdin)]))
            """
        let result = try ExternalTool.python.run(["-c", script], stdin: JSONWriter.bytes(.array(times.map { .integer($0) })))
        let texts = try #require(try JSONParser.parse(result.stdout).arrayValue).compactMap(\.stringValue)
        #expect(texts.count == times.count)
        for (time, text) in zip(times, texts) {
            #expect(HTTPDate.parse(text) == time, "\(text)")
        }
    }
}
