import DevtrustEncoding
import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// One key of a backend, with what it takes to load it again from its file.
struct BackendUnderTest {
    let key: any DeviceKey
    /// Keeps the TPM alive for the key's lifetime.
    let tpm: Swtpm?
    let reload: () throws -> any DeviceKey

    static func make(_ backend: KeyBackend) throws -> BackendUnderTest {
        switch backend {
        case .software:
            let key = try SoftwareDeviceKey.generate()
            let file = try key.pkcs8PEM()
            return BackendUnderTest(key: key, tpm: nil, reload: { try SoftwareDeviceKey(pkcs8PEM: file) })
        case .tpm:
            let tpm = try Swtpm()
            let selection = TPMSelection(tcti: tpm.tcti)
            let key = try TPMKeyProvisioner.create(selection).key
            let pem = key.keyFile.pem
            let metadata = key.parentMetadata
            return BackendUnderTest(key: key, tpm: tpm, reload: {
                try TPMDeviceKey(keyFile: try TSS2KeyFile(pem: pem), selection: selection, parentMetadata: metadata)
            })
        }
    }

    static var backends: [KeyBackend] {
        Swtpm.shouldRun ? [.software, .tpm] : [.software]
    }
}

/// The same suite for every backend: whatever holds the key, its signatures
/// must verify with a software verifier and encode canonically.
@Suite struct DeviceKeyBackendTests {
    @Test(arguments: BackendUnderTest.backends)
    func signaturesVerifyAndEncodeCanonically(backend: KeyBackend) throws {
        let subject = try BackendUnderTest.make(backend)
        #expect(subject.key.backend == backend)
        var signatures = [JSONValue]()
        var shortIntegers = 0
        // Enough signatures that some r or s has a leading zero byte (1 in 128 each).
        let count = 1500
        for index in 0..<count {
            let message = Array("message \(index) for \(backend)".utf8)
            let signature = try subject.key.sign(message: message)
            #expect(subject.key.publicKey.isValidSignature(signature, for: SHA256.hash(message)), "signature \(index) does not verify")
            #expect(signature.raw.count == 64)
            #expect(try ECDSASignature(der: signature.der) == signature, "non-canonical DER for signature \(index)")
            if signature.r[0] == 0 || signature.s[0] == 0 { shortIntegers += 1 }
            signatures.append(.object(["message": .string(Base64.encode(message)), "signature": .string(Base64.encode(signature.der))]))
        }
        #expect(shortIntegers > 0, "no short r or s in \(count) signatures: the padding cases were not exercised")
        if ExternalTool.python.shouldRun {
            let request: JSONObject = ["spki": .string(subject.key.publicKey.spkiBase64), "der": .array(signatures)]
            let result = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
            #expect(try JSONParser.parse(result.stdout).objectValue?["der"]?.objectValue?["valid"] == .integer(count), "\(result)")
        }
        if let tpm = subject.tpm {
            #expect(try tpm.transientHandles().isEmpty, "a transient handle was left in the TPM")
        }
    }

    @Test(arguments: BackendUnderTest.backends)
    func keyFileReloadsTheSameKey(backend: KeyBackend) throws {
        let subject = try BackendUnderTest.make(backend)
        let reloaded = try subject.reload()
        #expect(reloaded.publicKey == subject.key.publicKey)
        #expect(reloaded.fingerprint == subject.key.fingerprint)
        let message = Array("reloaded".utf8)
        #expect(subject.key.publicKey.isValidSignature(try reloaded.sign(message: message), for: SHA256.hash(message)))
        #expect(try P256PublicKey(spki: reloaded.publicKey.spki) == subject.key.publicKey)
    }

    @Test(arguments: BackendUnderTest.backends)
    func aSignatureIsOverTheDigestOnly(backend: KeyBackend) throws {
        let subject = try BackendUnderTest.make(backend)
        let digest = SHA256.hash(Array("a".utf8))
        let signature = try subject.key.sign(digest: digest)
        #expect(subject.key.publicKey.isValidSignature(signature, for: digest))
        #expect(!subject.key.publicKey.isValidSignature(signature, for: SHA256.hash(Array("b".utf8))))
        // ECDSA is randomised: two signatures of one digest differ, both verify.
        let again = try subject.key.sign(digest: digest)
        #expect(again != signature && subject.key.publicKey.isValidSignature(again, for: digest))
    }
}
