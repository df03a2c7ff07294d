import DevtrustEncoding
import DevtrustTestSupport
import Testing

@Suite struct JSONTests {
    @Test func writesCompactOrderedWithoutEscapedSlashes() {
        let value: JSONValue = .object([
            "alg": .string("ES256"), "typ": .string("JWT"), "url": .string("https://a/b"),
            "n": .integer(1_796_012_032), "list": .array([.bool(true), .null]), "q": .string("\"\\\n\u{01}é"),
        ])
        #expect(JSONWriter.string(value) == #"{"alg":"ES256","typ":"JWT","url":"https://a/b","n":1796012032,"list":[true,null],"q":"\"\\\n\u0001é"}"#)
    }

    @Test func parseRoundTripsAndKeepsOrder() throws {
        let text = #"{"z":1,"a":[1,2.5,-3e-2,{"x":"\u00e9\ud83d\ude00\/"}],"m":false,"n":null}"#
        let value = try JSONParser.parse(text)
        #expect(value.objectValue?.keys == ["z", "a", "m", "n"])
        #expect(JSONWriter.string(value) == #"{"z":1,"a":[1,2.5,-3e-2,{"x":"é😀/"}],"m":false,"n":null}"#)
        #expect(value.objectValue?["z"]?.int64Value == 1)
    }

    @Test func largeIntegersStayExact() throws {
        let value = try JSONParser.parse("[9007199254740993]")
        #expect(value.arrayValue?.first?.int64Value == 9_007_199_254_740_993)
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, "01", "1.", ".5", "-", "+1", "1e", "tru", "nul",
        #"{"a":1}x"#, #""unterminated"#, "\"tab\there\"", #""\x""#, #""\ud800""#, #""\udc00x""#,
        #"{"a":1,"a":2}"#, "[\"\u{7f}\"]x", "'single'", "[1 2]", "NaN", "Infinity", "/*c*/1",
    ])
    func rejectsInvalidJSON(text: String) {
        #expect(throws: JSONParseError.self, "accepted \(text.debugDescription)") { try JSONParser.parse(text) }
    }

    @Test func rejectsInvalidUTF8() throws {
        for bytes: [UInt8] in [[0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22]] {
            #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
        }
        #expect(try JSONParser.parse([0x22, 0xE2, 0x82, 0xAC, 0x22]) == .string("€"))
    }

    @Test func limitsDepth() throws {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        _ = try JSONParser.parse(ok)
    }

    @Test func duplicateKeyErrorNamesTheKey() {
        #expect(throws: JSONParseError(message: "duplicate key \"jti\"", offset: 12)) {
            try JSONParser.parse(#"{"jti":"a", "jti":"b"}"#)
        }
    }

    @Test func objectReaderNamesPathsAndTypes() throws {
        let reader = try JSONObjectReader(try JSONParser.parse(#"{"a":{"b":true},"list":[],"s":"x"}"#), path: "")
        #expect(throws: JSONFieldError(path: "a.b", kind: .invalidType(expected: "a string", found: "a boolean (true)"))) {
            try reader.optionalObject("a")?.string("b")
        }
        #expect(throws: JSONFieldError(path: "missing", kind: .missingRequiredField)) { try reader.string("missing") }
        #expect(throws: JSONFieldError(path: "s", kind: .unknownField(known: ["a", "list"]))) {
            try reader.rejectUnknownFields(known: ["a", "list"])
        }
        #expect(try reader.string("s") == "x")
    }

    @Test func timestampsAreUTC() {
        #expect(Timestamp.format(secondsSinceEpoch: 0) == "1970-01-01T00:00:00Z")
        #expect(Timestamp.format(secondsSinceEpoch: 1_796_012_032) == "2026-11-30T04:13:52Z")
        #expect(Timestamp.format(secondsSinceEpoch: 951_782_400) == "2000-02-29T00:00:00Z")
    }

    /// What a terminal acts on (C1 controls, bidirectional marks, line separators) is written as
    /// \u escapes: JSON printed on a terminal cannot drive it, and stays JSON.
    @Test func terminalControlsAreEscaped() throws {
        let text = "a\u{1B}b\u{7F}c\u{9B}d\u{202E}e\u{2028}f\u{2066}g é ü 中"
        let written = JSONWriter.string(.string(text))
        #expect(written == "\"a\\u001bb\\u007fc\\u009bd\\u202ee\\u2028f\\u2066g é ü 中\"", "\(written)")
        #expect(try JSONParser.parse(Array(written.utf8)) == .string(text))
        // An independent reader (Python's json) reads it back, and finds only ASCII escapes for the controls.
        if ExternalTool.python.shouldRun {
            let script = "import json,sys; t=json.load(sys.stdin); print(json.dumps([ord(c) for c in t]))"
            let result = try ExternalTool.python.run(["-c", script], stdin: Array(written.utf8))
            #expect(try JSONParser.parse(result.stdout) == .array(text.unicodeScalars.map { .integer(Int64($0.value)) }), "\(result)")
        }
    }
}
