import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore
import DevtrustTestSupport
import Foundation
import Testing

@Suite struct KeystoreFormatTests {
    static let sample = KeystoreState(
        key: KeyRecord(backend: .software, file: "key-abc.pem", fingerprint: "abc", createdAt: "2026-11-30T00:00:00Z"),
        registrations: [RegistrationRecord(registrationId: "r1", server: "https://s", flowType: "REGISTRATION", keyFingerprint: "abc", registeredAt: "2026-11-30T00:00:01Z")],
        tpmPersistentHandles: [0x8100_0001])

    @Test func roundTrips() throws {
        let bytes = KeystoreFormat.encode(Self.sample)
        #expect(try KeystoreFormat.decode(bytes, path: "k") == Self.sample)
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""tpmPersistentHandles": [\#n    "0x81000001"\#n  ]"#))
        #expect(try KeystoreFormat.decode(KeystoreFormat.encode(.empty), path: "k") == .empty)
    }

    /// A registration's user (the agent's machine keystore) round-trips; written only when set, in
    /// version 2 only, a uid and nothing else; the schema draws the same line.
    @Test func aRegistrationsUserIsReadBackAsWritten() throws {
        var state = Self.sample
        let fingerprint = String(repeating: "A", count: 43)
        state.key?.fingerprint = fingerprint
        state.registrations = [RegistrationRecord(registrationId: "r1", server: "https://s", flowType: "REGISTRATION", keyFingerprint: fingerprint,
                                                  registeredAt: "2026-11-30T00:00:01Z"),
                               RegistrationRecord(registrationId: "r2", server: "https://s", flowType: "REGISTRATION", keyFingerprint: fingerprint,
                                                  registeredAt: "2026-11-30T00:00:02Z", uid: 1001)]
        let bytes = KeystoreFormat.encode(state)
        #expect(try KeystoreFormat.decode(bytes, path: "k") == state)
        #expect(String(decoding: bytes, as: UTF8.self).components(separatedBy: "\"uid\"").count == 2)
        let directory = TemporaryDirectory()
        let file = directory.write("uid.json", bytes)
        let checked = try ExternalTool.python.run([Repository.path("Tests/Interop/validate_keystore.py"), Repository.path("keystore/schema"), file])
        #expect(checked.status == 0, "\(checked)")
        for (uid, reason) in [(JSONValue.string("1001"), "string"), (.integer(-1), "negative"), (.integer(4_294_967_296), "too large"), (.number("1.5"), "fraction")] {
            var object = try JSONParser.parse(bytes).objectValue!
            var records = object["registrations"]!.arrayValue!
            var record = records[1].objectValue!
            record["uid"] = uid
            records[1] = .object(record)
            object["registrations"] = .array(records)
            #expect(throws: KeystoreError.self, "\(reason)") { try KeystoreFormat.decode(JSONWriter.bytes(.object(object)), path: "k") }
        }
        var versionOne = try JSONParser.parse(bytes).objectValue!
        versionOne["version"] = .integer(1)
        versionOne["signIns"] = nil
        #expect(throws: KeystoreError.self) { try KeystoreFormat.decode(JSONWriter.bytes(.object(versionOne)), path: "k") }
    }

    /// The account that had a registration's uid, and the registrations forgotten with whose they were,
    /// round-trip and match the schema; written only when set (a keystore of one's own is as it was);
    /// an account without a uid, or one that is neither a plain name nor `sha256:` and a digest, is
    /// refused, as is either field in version 1; the schema draws the same lines.
    @Test func accountsAndFormerRegistrationsAreReadBackAsWritten() throws {
        var state = Self.sample
        let fingerprint = String(repeating: "A", count: 43)
        state.key?.fingerprint = fingerprint
        let long = String(repeating: "é", count: 40)
        #expect(AccountName.recorded("alice") == "alice" && AccountName.recorded(long).hasPrefix("sha256:") && AccountName.recorded(long).count == 71)
        #expect(AccountName.recorded("a b") != "a b" && AccountName.isRecorded(AccountName.recorded("a b")) && !AccountName.isRecorded("a:b"))
        state.registrations = [RegistrationRecord(registrationId: "r2", server: "https://s", flowType: "REGISTRATION", keyFingerprint: fingerprint,
                                                  registeredAt: "2026-11-30T00:00:02Z", uid: 1001, account: "alice"),
                               RegistrationRecord(registrationId: "r3", server: "https://s", flowType: "REGISTRATION", keyFingerprint: fingerprint,
                                                  registeredAt: "2026-11-30T00:00:03Z", uid: 1002, account: AccountName.recorded(long))]
        state.formerRegistrations = [FormerRegistration(registrationId: "r1", uid: 1001, account: "alice"),
                                     FormerRegistration(registrationId: "r0", uid: 1003, account: nil)]
        let bytes = KeystoreFormat.encode(state)
        #expect(try KeystoreFormat.decode(bytes, path: "k") == state)
        #expect(!String(decoding: KeystoreFormat.encode(Self.sample), as: UTF8.self).contains("formerRegistrations"))
        let directory = TemporaryDirectory()
        var files = [directory.write("accounts.json", bytes)]
        var refusals = [(String, [UInt8])]()
        func edited(_ change: (inout JSONObject) -> Void) -> [UInt8] {
            var object = try! JSONParser.parse(bytes).objectValue!
            change(&object)
            return JSONWriter.bytes(.object(object))
        }
        func registration(_ change: @escaping (inout JSONObject) -> Void) -> (inout JSONObject) -> Void {
            { object in
                var records = object["registrations"]!.arrayValue!
                var record = records[0].objectValue!
                change(&record)
                records[0] = .object(record)
                object["registrations"] = .array(records)
            }
        }
        refusals.append(("account without uid", edited(registration { $0["uid"] = nil })))
        refusals.append(("account with a colon", edited(registration { $0["account"] = .string("a:b") })))
        refusals.append(("account too long", edited(registration { $0["account"] = .string(String(repeating: "a", count: 65)) })))
        refusals.append(("account not a digest", edited(registration { $0["account"] = .string("sha256:" + String(repeating: "G", count: 64)) })))
        refusals.append(("former without uid", edited { $0["formerRegistrations"] = .array([.object(["registrationId": .string("r1")])]) }))
        refusals.append(("former with an unknown field", edited { $0["formerRegistrations"] = .array([.object(["registrationId": .string("r1"), "uid": .integer(1), "server": .string("s")])]) }))
        refusals.append(("formers not an array", edited { $0["formerRegistrations"] = .object([:]) }))
        // Where the reader was laxer than the schema (an outside review): null, empty, one too many.
        refusals.append(("account null", edited(registration { $0["account"] = .null })))
        refusals.append(("registration with an empty id", edited(registration { $0["registrationId"] = .string("") })))
        refusals.append(("former's account null", edited { $0["formerRegistrations"] = .array([.object(["registrationId": .string("r1"), "uid": .integer(1), "account": .null])]) }))
        refusals.append(("former with an empty id", edited { $0["formerRegistrations"] = .array([.object(["registrationId": .string(""), "uid": .integer(1)])]) }))
        refusals.append(("one former too many", edited { object in
            object["formerRegistrations"] = .array((0...FormerRegistration.maximumKept).map { .object(["registrationId": .string("r\($0)"), "uid": .integer(1)]) })
        }))
        for (reason, document) in refusals {
            #expect(throws: KeystoreError.self, "\(reason)") { try KeystoreFormat.decode(document, path: "k") }
            files.append(directory.write("refused-\(files.count).json", document))
        }
        var versionOne = try JSONParser.parse(bytes).objectValue!
        versionOne["version"] = .integer(1)
        versionOne["signIns"] = nil
        versionOne["registrations"] = .array([])
        #expect(throws: KeystoreError.self) { try KeystoreFormat.decode(JSONWriter.bytes(.object(versionOne)), path: "k") }
        // The schema, read by python3-jsonschema, agrees on each.
        let checked = try ExternalTool.python.run([Repository.path("Tests/Interop/validate_keystore.py"), Repository.path("keystore/schema")] + files)
        let lines = checked.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == files.count, "\(checked)")
        #expect(lines.first == "ok \(files[0])", "\(checked)")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("invalid ") }, "\(checked)")
    }

    static func document(_ edit: (inout JSONObject) -> Void) -> [UInt8] {
        var object = try! JSONParser.parse(KeystoreFormat.encode(sample)).objectValue!
        edit(&object)
        return JSONWriter.bytes(.object(object))
    }

    /// A TPM key's recorded TCTI round-trips; one that would run a program, write
    /// a file or load a library of the keystore's choosing is refused, as is one on a software key.
    @Test func aRecordedTCTIIsReadBackOnlyWhenItIsSafe() throws {
        var state = Self.sample
        // A document the schema accepts but for the TCTI (a fingerprint is 43 base64url characters).
        state.registrations = []
        state.key = KeyRecord(backend: .tpm, file: "key-abc.pem", fingerprint: String(repeating: "A", count: 43), createdAt: "2026-11-30T00:00:00Z",
                              tcti: "swtpm:host=127.0.0.1,port=2321")
        #expect(try KeystoreFormat.decode(KeystoreFormat.encode(state), path: "k") == state)
        // The schema (read by python3-jsonschema) draws the same line as the decoder.
        let directory = TemporaryDirectory()
        func schema(_ document: [UInt8], _ name: String) throws -> ProcessResult {
            let file = directory.file(name + ".json")
            _ = FileManager.default.createFile(atPath: file, contents: Data(document))
            return try ExternalTool.python.run([Repository.path("Tests/Interop/validate_keystore.py"), Repository.path("keystore/schema"), file])
        }
        let accepted = ["device", "device:", "device:/dev/tpmrm0", "tabrmd:bus_type=session", "mssim:host=localhost,port=2321"]
        for (index, tcti) in accepted.enumerated() {
            state.key?.tcti = tcti
            #expect(try KeystoreFormat.decode(KeystoreFormat.encode(state), path: "k").key?.tcti == tcti)
            let checked = try schema(KeystoreFormat.encode(state), "accepted-\(index)")
            #expect(checked.status == 0, "the schema refuses \(tcti): \(checked)")
        }
        let refused = ["cmd:tpm2_send", "pcap:device:/dev/tpmrm0", "/usr/lib/evil.so", "libtss2-tcti-swtpm.so.0", "device:/home/u/tpm",
                       "device:/dev/../home/u/tpm", "device:/dev/..", "swtpm:host=a\nb", "", "swtpm:" + String(repeating: "x", count: 300)]
        for (index, tcti) in refused.enumerated() {
            state.key?.tcti = tcti
            #expect(throws: KeystoreError.self) { try KeystoreFormat.decode(KeystoreFormat.encode(state), path: "k") }
            let checked = try schema(KeystoreFormat.encode(state), "refused-\(index)")
            #expect(checked.status == 1 && checked.output.contains("tcti"), "the schema accepts \(tcti): \(checked)")
        }
        var software = Self.sample
        software.key?.tcti = "swtpm"
        #expect(throws: KeystoreError.self) { try KeystoreFormat.decode(KeystoreFormat.encode(software), path: "k") }
    }

    @Test func refusesANewerVersion() {
        let newer = KeystoreFormat.currentVersion + 1
        #expect(throws: KeystoreError.unsupportedVersion(path: "k", found: newer, supported: KeystoreFormat.currentVersion)) {
            try KeystoreFormat.decode(Self.document { $0["version"] = .integer(newer) }, path: "k")
        }
    }

    @Test(arguments: [
        ("version 0", "there is no keystore version 0"),
        ("no version", "missing required field \"version\""),
        ("string version", "field \"version\" must be an integer"),
        ("unknown field", "unknown field \"extra\""),
        ("bad backend", "unknown backend \"hsm\""),
        ("path as file", "must be a file name inside the keystore"),
        ("hidden file", "must be a file name inside the keystore"),
        ("registration missing server", "missing required field \"registrations[0].server\""),
        ("registrations without key", "registrations are recorded but there is no key"),
        ("bad handle", "tpmPersistentHandles[0]"),
        ("not an object", "must be an object"),
    ])
    func corruptDocumentsNameTheProblem(name: String, expected: String) {
        let bytes: [UInt8]
        switch name {
        case "version 0": bytes = Self.document { $0["version"] = .integer(0) }
        case "no version": bytes = Self.document { $0["version"] = nil }
        case "string version": bytes = Self.document { $0["version"] = .string("1") }
        case "unknown field": bytes = Self.document { $0["extra"] = .bool(true) }
        case "bad backend": bytes = Self.document { edit(&$0, "key") { $0["backend"] = .string("hsm") } }
        case "path as file": bytes = Self.document { edit(&$0, "key") { $0["file"] = .string("../../etc/shadow") } }
        case "hidden file": bytes = Self.document { edit(&$0, "key") { $0["file"] = .string(".lock") } }
        case "registration missing server":
            bytes = Self.document { object in
                var record = object["registrations"]!.arrayValue![0].objectValue!
                record["server"] = nil
                object["registrations"] = .array([.object(record)])
            }
        case "registrations without key": bytes = Self.document { $0["key"] = .null }
        case "bad handle": bytes = Self.document { $0["tpmPersistentHandles"] = .array([.integer(5)]) }
        default: bytes = Array("[1]".utf8)
        }
        do {
            let state = try KeystoreFormat.decode(bytes, path: "/ks/keystore.json")
            Issue.record("accepted \(name): \(state)")
        } catch let KeystoreError.corrupt(path, detail) {
            #expect(path == "/ks/keystore.json")
            #expect(detail.contains(expected), "\(detail)")
        } catch {
            Issue.record("\(name): \(error)")
        }
    }

    @Test func garbageIsCorrupt() {
        for text in ["", "{", "null", "\u{0}\u{1}", #"{"version":1,"version":1}"#] {
            #expect(throws: KeystoreError.self) { try KeystoreFormat.decode(Array(text.utf8), path: "k") }
        }
    }

    /// The field lists the encoder, the decoder and `status` use are the schema's, in its order.
    @Test func theFieldListsAreTheSchemas() throws {
        func properties(_ file: String, _ path: String...) throws -> [String] {
            var value = try JSONParser.parse(Array(try String(contentsOfFile: Repository.path("keystore/schema/" + file), encoding: .utf8).utf8))
            for step in path {
                value = step == "oneOf[1]" ? value.objectValue!["oneOf"]!.arrayValue![1] : value.objectValue![step]!
            }
            return value.objectValue!["properties"]!.objectValue!.keys
        }
        #expect(try properties("keystore.v2.schema.json") == KeystoreField.Manifest.allCases.map(\.rawValue))
        #expect(try properties("keystore.v2.schema.json", "properties", "key", "oneOf[1]") == KeystoreField.Key.allCases.map(\.rawValue))
        #expect(try properties("registration.v1.schema.json") == KeystoreField.Registration.allCases.filter { $0 != .uid && $0 != .account }.map(\.rawValue))
        #expect(try properties("keystore.v2.schema.json", "properties", "formerRegistrations", "items") == KeystoreField.FormerRegistration.allCases.map(\.rawValue))
        #expect(try properties("registration.v2.schema.json") == KeystoreField.Registration.allCases.map(\.rawValue))
        #expect(try properties("signin.v2.schema.json") == KeystoreField.SignIn.allCases.map(\.rawValue))
    }
}

private func edit(_ object: inout JSONObject, _ key: String, _ change: (inout JSONObject) -> Void) {
    var inner = object[key]!.objectValue!
    change(&inner)
    object[key] = .object(inner)
}
