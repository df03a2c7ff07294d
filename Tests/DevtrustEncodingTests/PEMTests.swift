import DevtrustEncoding
import Testing

@Suite struct PEMTests {
    /// The byte form (one buffer, for private keys) and the String form write the same text.
    @Test(arguments: [0, 1, 47, 48, 49, 96, 138])
    func bytesAndTextAreTheSamePEM(count: Int) throws {
        let der = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let text = PEM.encode(der, label: "PRIVATE KEY")
        #expect(PEM.encode(bytes: der, label: "PRIVATE KEY") == Array(text.utf8))
        let lines = text.split(separator: "\n")
        #expect(lines.first == "-----BEGIN PRIVATE KEY-----" && lines.last == "-----END PRIVATE KEY-----")
        #expect(lines.dropFirst().dropLast().allSatisfy { $0.count <= 64 })
        #expect(lines.dropFirst().dropLast().joined() == Base64.encode(der))
        #expect(PEM.decode(text, label: "PRIVATE KEY") == der)
    }

    /// A label is a block only on a BEGIN line of its own, as `block` reads it.
    @Test func labelsAreTheBeginLines() {
        let text = "# not a -----BEGIN TSS2 PRIVATE KEY----- file\n  -----BEGIN PRIVATE KEY-----\r\nAAAA\n-----END PRIVATE KEY-----\n-----BEGIN EC PRIVATE KEY-----\n"
        #expect(PEM.labels(Array(text.utf8)) == ["PRIVATE KEY", "EC PRIVATE KEY"])
        #expect(PEM.labels(Array("-----BEGIN -----\n----------\n".utf8)) == [""])
    }

    @Test func aBlockThatCannotBeReadSaysWhy() throws {
        let good = PEM.encode([UInt8](repeating: 0x41, count: 100), label: "PRIVATE KEY")
        var lines = good.split(separator: "\n").map(String.init)
        #expect(try PEM.block(Array(good.utf8), label: "PUBLIC KEY") == nil)
        lines[2] = "!" + lines[2].dropFirst()
        #expect(throws: PEMError(label: "PRIVATE KEY", reason: .notBase64(line: 2))) {
            try PEM.block(Array(lines.joined(separator: "\n").utf8), label: "PRIVATE KEY")
        }
        // Blank lines count: the bad line is the third of the file's lines after BEGIN.
        var spaced = lines
        spaced.insert("", at: 1)
        #expect(throws: PEMError(label: "PRIVATE KEY", reason: .notBase64(line: 3))) {
            try PEM.block(Array(spaced.joined(separator: "\n").utf8), label: "PRIVATE KEY")
        }
        lines[2] = String(lines[2].dropFirst())
        #expect(throws: PEMError(label: "PRIVATE KEY", reason: .notBase64(line: 3))) {
            try PEM.block(Array(lines.joined(separator: "\n").utf8), label: "PRIVATE KEY")
        }
        #expect(throws: PEMError(label: "PRIVATE KEY", reason: .noEndLine)) {
            try PEM.block(Array(lines.dropLast().joined(separator: "\n").utf8), label: "PRIVATE KEY")
        }
    }
}
