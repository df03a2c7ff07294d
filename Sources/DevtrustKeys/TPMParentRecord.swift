import CTPM2

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
