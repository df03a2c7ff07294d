/// What a TPM calls a loaded object: its name (nameAlg || the hash of its public area: which key it
/// is) and its qualified name (nameAlg || the hash of its parent's qualified name and its name: also
/// under which parent it was loaded). A key's public part loaded alone (LoadExternal, which anyone
/// who can reach the TPM may do) has the key's name, but another qualified name, and cannot sign.
struct TPMObjectNames: Equatable, Sendable {
    let name: [UInt8]
    let qualifiedName: [UInt8]

    /// TPM_ALG_SHA256: the name algorithm of devtrust's keys and storage root keys, the one devtrust
    /// works names out with (a name of another algorithm is only read from the TPM).
    static let sha256: UInt16 = 0x000B

    /// The name of an object whose public area is `publicArea` (a marshalled TPM2B_PUBLIC), when its
    /// name algorithm is SHA-256.
    static func name(ofPublicArea publicArea: [UInt8]) -> [UInt8]? {
        guard publicArea.count > 6, Int(publicArea[0]) << 8 | Int(publicArea[1]) == publicArea.count - 2 else { return nil }
        // TPMT_PUBLIC: its type, then its name algorithm.
        let area = Array(publicArea.dropFirst(2))
        let nameAlgorithm = Array(area[2..<4])
        guard algorithm(of: nameAlgorithm) == sha256 else { return nil }
        return nameAlgorithm + SHA256.hash(area).bytes
    }

    /// The qualified name of the object named `name` loaded under a parent of qualified name
    /// `parentQualifiedName` (a hierarchy's is its handle), when its name algorithm is SHA-256.
    static func qualifiedName(of name: [UInt8], under parentQualifiedName: [UInt8]) -> [UInt8]? {
        guard name.count == 34, algorithm(of: name) == sha256 else { return nil }
        return Array(name.prefix(2)) + SHA256.hash(parentQualifiedName + name).bytes
    }

    /// The qualified name of a primary key of the owner (storage) hierarchy named `name`.
    static func ownerPrimaryQualifiedName(of name: [UInt8]) -> [UInt8]? {
        let owner = TPMHandle.owner
        return qualifiedName(of: name, under: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: owner >> $0) })
    }

    /// The first two bytes, big-endian: a name's algorithm.
    private static func algorithm(of bytes: [UInt8]) -> UInt16? {
        bytes.count >= 2 ? UInt16(bytes[0]) << 8 | UInt16(bytes[1]) : nil
    }
}
