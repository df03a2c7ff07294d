import CTPM2
import DevtrustEncoding

/// The standard `TSS2 PRIVATE KEY` file (as tpm2-openssl and tpm2-tss-engine write it;
/// the optional fields [1] to [5] are those of draft-bottomley-tpm2-keys):
///
///     TPMKey ::= SEQUENCE {
///         type        OBJECT IDENTIFIER (2.23.133.10.1.3, loadableKey),
///         emptyAuth   [0] EXPLICIT BOOLEAN,
///         policy      [1] EXPLICIT SEQUENCE OF TPMPolicy OPTIONAL,      -- not supported
///         secret      [2] EXPLICIT OCTET STRING OPTIONAL,               -- not supported
///         authPolicy  [3] EXPLICIT SEQUENCE OF TPMAuthPolicy OPTIONAL,  -- not supported
///         description [4] EXPLICIT UTF8String OPTIONAL,                 -- ignored
///         rsaParent   [5] EXPLICIT BOOLEAN OPTIONAL,                    -- TRUE not supported
///         parent      INTEGER,          -- 0x81000001, or 0x40000001 for a primary made from the SRK template
///         pubkey      OCTET STRING,     -- TPM2B_PUBLIC
///         privkey     OCTET STRING }    -- TPM2B_PRIVATE, wrapped by the parent: useless outside this TPM
public struct TSS2KeyFile: Equatable, Sendable {
    public static let pemLabel = "TSS2 PRIVATE KEY"
    /// DER of OBJECT IDENTIFIER 2.23.133.10.1.3.
    static let loadableKeyOID: [UInt8] = [0x67, 0x81, 0x05, 0x0A, 0x01, 0x03]

    public let parent: UInt32
    /// Marshalled TPM2B_PUBLIC.
    public let publicArea: [UInt8]
    /// Marshalled TPM2B_PRIVATE.
    public let privateArea: [UInt8]

    public init(parent: UInt32, publicArea: [UInt8], privateArea: [UInt8]) {
        self.parent = parent
        self.publicArea = publicArea
        self.privateArea = privateArea
    }

    public var der: [UInt8] {
        DERWriter.element(tag: 0x30,
            DERWriter.element(tag: 0x06, Self.loadableKeyOID)
            + DERWriter.element(tag: 0xA0, DERWriter.boolean(true))
            + DERWriter.unsignedInteger(UInt64(parent))
            + DERWriter.element(tag: 0x04, publicArea)
            + DERWriter.element(tag: 0x04, privateArea))
    }

    public var pem: String { PEM.encode(der, label: Self.pemLabel) }

    public init(der: [UInt8]) throws(TPMError) {
        do {
            var outer = DERReader(der)
            var key = try outer.readConstructed(tag: 0x30, "TPMKey")
            try outer.expectEnd("TPMKey")
            guard try key.read(tag: 0x06, "type") == Self.loadableKeyOID else {
                throw DERError("type is not loadableKey (2.23.133.10.1.3); importable and sealed keys are not supported")
            }
            var emptyAuth = false
            if key.nextTag == 0xA0 {
                var explicit = try key.readConstructed(tag: 0xA0, "emptyAuth")
                emptyAuth = try explicit.readBoolean("emptyAuth")
                try explicit.expectEnd("emptyAuth")
            }
            guard emptyAuth else { throw UnsupportedFeature("a password (emptyAuth is not TRUE)") }
            try Self.checkOptionalFields(&key)
            let parent = try key.readUnsignedInteger("parent")
            guard parent <= UInt64(UInt32.max) else { throw DERError("parent is not a TPM handle") }
            self.parent = parent == 0 ? TPMHandle.owner : UInt32(parent)
            publicArea = try key.read(tag: 0x04, "pubkey")
            privateArea = try key.read(tag: 0x04, "privkey")
            try key.expectEnd("TPMKey")
        } catch let error as UnsupportedFeature {
            throw .unsupportedKey("TSS2 keys with \(error.feature) are not supported; use a key without a password, policies or secrets (`devtrust init --backend tpm` creates one)")
        } catch {
            throw .unsupportedKey("not a TSS2 PRIVATE KEY: \(error)")
        }
        _ = try unmarshalledPublic()
        _ = try unmarshalledPrivate()
    }

    private struct UnsupportedFeature: Error {
        let feature: String
        init(_ feature: String) { self.feature = feature }
    }

    /// The optional fields [1] to [5] between emptyAuth and parent, in order:
    /// a description is ignored; policies, secrets and an RSA parent devtrust
    /// cannot use (nor fields it does not know).
    private static func checkOptionalFields(_ key: inout DERReader) throws {
        var previous: UInt8 = 0
        while let tag = key.nextTag, tag > 0xA0, tag <= 0xBE {
            let number = tag - 0xA0
            guard number > previous else { throw DERError("TPMKey [\(number)] is out of order") }
            previous = number
            var field = try key.readConstructed(tag: tag, "TPMKey [\(number)]")
            switch number {
            case 1: throw UnsupportedFeature("a TPM policy (TPMKey [1] policy)")
            case 2: throw UnsupportedFeature("an imported secret (TPMKey [2] secret)")
            case 3: throw UnsupportedFeature("signed authorization policies (TPMKey [3] authPolicy)")
            case 4:
                _ = try field.read(tag: 0x0C, "description")
            case 5:
                if try field.readBoolean("rsaParent") { throw UnsupportedFeature("an RSA parent (TPMKey [5] rsaParent)") }
            default:
                throw UnsupportedFeature("a field devtrust does not know (TPMKey [\(number)])")
            }
            try field.expectEnd("TPMKey [\(number)]")
        }
    }

    public init(pem text: String) throws(TPMError) {
        guard let der = PEM.decode(text, label: Self.pemLabel) else {
            throw .unsupportedKey("no -----BEGIN \(Self.pemLabel)----- block")
        }
        try self.init(der: der)
    }

    func unmarshalledPublic() throws(TPMError) -> TPM2B_PUBLIC {
        try TSS2Library.unmarshalPublic(publicArea, what: "the public part")
    }

    func unmarshalledPrivate() throws(TPMError) -> TPM2B_PRIVATE {
        let tss = try TSS2Library.load().pointee
        var value = TPM2B_PRIVATE()
        var offset = 0
        let rc = privateArea.withUnsafeBufferPointer { tss.Tss2_MU_TPM2B_PRIVATE_Unmarshal($0.baseAddress, $0.count, &offset, &value) }
        guard rc == 0, offset == privateArea.count else { throw .unsupportedKey("the private part is not a TPM2B_PRIVATE") }
        return value
    }

    /// Marshals a created key's public and private parts.
    static func marshal(public publicValue: TPM2B_PUBLIC, private privateValue: TPM2B_PRIVATE, parent: UInt32) throws(TPMError) -> TSS2KeyFile {
        let tss = try TSS2Library.load().pointee
        var publicValue = publicValue
        var privateValue = privateValue
        var publicBytes = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size)
        var privateBytes = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PRIVATE>.size)
        var publicLength = 0
        var privateLength = 0
        guard tss.Tss2_MU_TPM2B_PUBLIC_Marshal(&publicValue, &publicBytes, publicBytes.count, &publicLength) == 0,
              tss.Tss2_MU_TPM2B_PRIVATE_Marshal(&privateValue, &privateBytes, privateBytes.count, &privateLength) == 0 else {
            throw .unsupportedKey("cannot marshal the key the TPM created")
        }
        return TSS2KeyFile(parent: parent, publicArea: Array(publicBytes.prefix(publicLength)), privateArea: Array(privateBytes.prefix(privateLength)))
    }

    /// Whether the key is exempt from the TPM's dictionary-attack lockout (noDA).
    /// Keys devtrust made before it set noDA are not: another program can lock
    /// them out of the TPM with a few wrong passwords on any DA-protected key.
    public var isLockoutExempt: Bool {
        guard var value = try? unmarshalledPublic() else { return false }
        return devtrust_key_is_lockout_exempt(&value) == 1
    }

    /// The key's public point, checked to be a P-256 signing key devtrust can use.
    /// `validatingPoint: false` skips the on-curve check (OpenSSL's decoder, about
    /// a millisecond) for a key whose fingerprint the caller compares with its record.
    public func publicKey(validatingPoint: Bool = true) throws(TPMError) -> P256PublicKey {
        var value = try unmarshalledPublic()
        switch devtrust_signing_key_problem(&value) {
        case 0: break
        case 1: throw .unsupportedKey("it is not an ECC key")
        case 2: throw .unsupportedKey("it is not on the NIST P-256 curve")
        case 3: throw .unsupportedKey("it is not a signing key")
        case 4: throw .unsupportedKey("it is a restricted key (it can only sign TPM-generated data)")
        case 5: throw .unsupportedKey("its scheme is not ECDSA with SHA-256")
        case 6: throw .unsupportedKey("the TPM did not generate it (sensitiveDataOrigin is clear): it was imported (tpm2_import) from a private key that exists outside the TPM, so devtrust could not honestly say that the key never left the TPM. Create the key in the TPM instead: `devtrust init --backend tpm`, or `openssl genpkey -provider tpm2 -algorithm EC -pkeyopt group:P-256`")
        case 7: throw .unsupportedKey("it can be duplicated to another TPM (fixedTPM is clear), so it is not bound to this one. Create the key in the TPM instead: `devtrust init --backend tpm`")
        default: throw .unsupportedKey("it can be duplicated under another parent (fixedParent is clear), so it is not bound to this TPM. Create the key in the TPM instead: `devtrust init --backend tpm`")
        }
        var x = [UInt8](repeating: 0, count: 32), y = [UInt8](repeating: 0, count: 32)
        var xSize: UInt16 = 0, ySize: UInt16 = 0
        guard devtrust_public_point(&value, &x, &xSize, &y, &ySize) == 1 else {
            throw .unsupportedKey("the public point is malformed")
        }
        // TPMs may return coordinates shorter than 32 bytes; left-pad them.
        let paddedX = [UInt8](repeating: 0, count: 32 - Int(xSize)) + x.prefix(Int(xSize))
        let paddedY = [UInt8](repeating: 0, count: 32 - Int(ySize)) + y.prefix(Int(ySize))
        guard validatingPoint else { return P256PublicKey(unvalidatedX: paddedX, y: paddedY) }
        do {
            return try P256PublicKey(x: paddedX, y: paddedY)
        } catch {
            throw .unsupportedKey("the public point is not on P-256: \(error)")
        }
    }
}
