import CTPM2
import DevtrustEncoding

/// The parent a TPM device key was made under, as `init` recorded it: ESAPI's
/// serialization of that object (`Esys_TR_Serialize`: handle, name, resource
/// type, public area). Its name pins the storage root key (devtrust salts its
/// sessions to it and recognises a replaced or recreated SRK by it); its public
/// area is the template that recreates it, since the TPM derives a primary key
/// from its template and the hierarchy's seed, the same every time.
public struct TPMParentRecord: Equatable, Sendable {
    public let handle: UInt32
    public let name: [UInt8]
    /// Marshalled TPM2B_PUBLIC.
    public let publicArea: [UInt8]

    /// IESYSC_KEY_RSRC: the serialization of a key (its public area follows).
    private static let keyResource: UInt32 = 1

    /// Reads the serialization; nil when it is not one of a key.
    public init?(serialized bytes: [UInt8]) {
        var reader = BigEndianReader(bytes)
        guard let handle = reader.uint32(), let nameSize = reader.uint16(), let name = reader.bytes(Int(nameSize)),
              reader.uint32() == Self.keyResource, let publicSize = reader.uint16(), let area = reader.bytes(Int(publicSize)),
              reader.isAtEnd else { return nil }
        self.handle = handle
        self.name = name
        publicArea = [UInt8(publicSize >> 8), UInt8(publicSize & 0xFF)] + area
    }

    /// Whether the parent is devtrust's standard SRK (whoever made it).
    public var isStandardStorageRootKey: Bool {
        guard var value = try? unmarshalledPublic() else { return false }
        return devtrust_is_standard_srk(&value) == 1
    }

    /// Whether the parent is exempt from dictionary-attack lockout (noDA). A
    /// DA-protected parent exposes its children: loading them needs its authorization.
    public var isLockoutExempt: Bool {
        guard var value = try? unmarshalledPublic() else { return false }
        return devtrust_key_is_lockout_exempt(&value) == 1
    }

    /// Why this object cannot be the device key's parent (besides lockout), or nil.
    public var unsuitability: String? {
        guard var value = try? unmarshalledPublic() else { return "its public area cannot be read" }
        switch devtrust_parent_problem(&value) {
        case 0: return nil
        case 1: return "it is not an ECC or RSA key"
        case 2: return "it is not a storage key"
        case 3: return "its symmetric algorithm is not AES-CFB"
        case 4: return "it can leave the TPM (fixedTPM or fixedParent is clear)"
        case 5: return "its authorization is not a plain one (a policy, or userWithAuth clear)"
        default: return "its template (curve, key size, scheme or name algorithm) is one tpm2-tools cannot make again, so devtrust could not say how to put it back if it were evicted"
        }
    }

    /// The tpm2-tools commands that make this parent again, from the same
    /// template, at its handle (or `target`). `zeroUnique`: whether its template's unique
    /// field was zero-filled (TCG style) rather than empty; nil when devtrust
    /// could not try (an owner password): then the command makes the empty one,
    /// checks its name against the recorded one, and makes the other if needed.
    /// nil when tpm2-tools cannot make that template (`init` never records
    /// such a parent: only a hand-edited keystore has one).
    public func recreationCommand(at target: UInt32? = nil, zeroUnique: Bool?, ownerPassword: Bool) -> String? {
        var summary = devtrust_template_summary()
        guard var value = try? unmarshalledPublic(), devtrust_template_summary(&value, &summary) == 1 else { return nil }
        let isECC = summary.type == 0x0023
        // tpm2-tools' names: ecc256, ..., ecc_sm2 for SM2's curve; rsa2048, ...
        let key = isECC ? (summary.curve == 0x0020 ? "ecc_sm2" : "ecc\(summary.key_bits)") : "rsa\(summary.key_bits)"
        let algorithm = key + ":aes\(summary.symmetric_bits)cfb"
        let hashes: [UInt16: String] = [0x0004: "sha1", 0x000B: "sha256", 0x000C: "sha384", 0x000D: "sha512", 0x0012: "sm3_256"]
        let names: [(UInt32, String)] = [(0x2, "fixedtpm"), (0x4, "stclear"), (0x10, "fixedparent"), (0x20, "sensitivedataorigin"),
                                         (0x40, "userwithauth"), (0x80, "adminwithpolicy"), (0x400, "noda"), (0x800, "encryptedduplication"),
                                         (0x10000, "restricted"), (0x20000, "decrypt"), (0x40000, "sign")]
        let attributes = names.filter { summary.attributes & $0.0 != 0 }.map(\.1).joined(separator: "|")
        let password = ownerPassword ? " -P PASSWORD" : ""
        // tpm2-tools reads -u into the TPMU_PUBLIC_ID structure: a little-endian
        // size, then the bytes (an ECC coordinate's whole 128-byte buffer; for
        // RSA, at most the modulus), zeros here.
        let size = summary.zero_unique_size
        let field = "printf '" + octal(UInt8(size & 0xFF)) + octal(UInt8(size >> 8)) + "'; head -c \(isECC ? 128 : Int(size)) /dev/zero"
        let unique = "{ " + (isECC ? field + "; " + field : field) + "; } > unique.bin && "
        let create = "tpm2_createprimary -C o\(password) -g \(hashes[summary.name_algorithm] ?? "sha256") -G \(algorithm) -a '\(attributes)'"
        // Without a resource manager the tools leave what they load in the TPM's
        // few slots: flush them (with one, as usual, this changes nothing).
        let evict = "tpm2_evictcontrol -C o\(password) -c parent.ctx \(TPMHandle.format(target ?? handle)) >/dev/null && tpm2_flushcontext -t"
        switch zeroUnique {
        case true?: return unique + create + " -u unique.bin -c parent.ctx >/dev/null && " + evict
        case false?: return create + " -c parent.ctx >/dev/null && " + evict
        case nil:
            // Either template, whichever gives the recorded name; neither: nothing is made persistent.
            let recorded = Hex.encode(name)
            let isRecorded = "tpm2_readpublic -c parent.ctx -n parent.name >/dev/null && tpm2_flushcontext -t && [ \"$(od -An -v -tx1 parent.name | tr -d ' \\n')\" = \(recorded) ]"
            let neither = "echo 'neither template gives the recorded storage root key: the TPM was cleared, or the keystore is from another machine; the device key is lost: devtrust init --force' >&2; false"
            return create + " -c parent.ctx >/dev/null && if " + isRecorded + "; then true; else "
                + unique + create + " -u unique.bin -c parent.ctx >/dev/null && if " + isRecorded + "; then true; else " + neither + "; fi; fi && " + evict
        }
    }

    /// A byte as printf's octal escape (POSIX sh's printf has no \x).
    private func octal(_ byte: UInt8) -> String {
        "\\" + String(byte >> 6) + String((byte >> 3) & 7) + String(byte & 7)
    }

    private func unmarshalledPublic() throws(TPMError) -> TPM2B_PUBLIC {
        try TSS2Library.unmarshalPublic(publicArea, what: "the recorded parent's public area")
    }
}

/// Big-endian fields, as the TSS marshals them.
private struct BigEndianReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func uint16() -> UInt16? {
        bytes(2).map { UInt16($0[0]) << 8 | UInt16($0[1]) }
    }

    mutating func uint32() -> UInt32? {
        bytes(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }
}
