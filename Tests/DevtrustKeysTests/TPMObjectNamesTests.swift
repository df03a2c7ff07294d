import DevtrustEncoding
@testable import DevtrustKeys
import Testing

/// The names devtrust works out for a key it looks for among the TPM's transient objects, against
/// what a TPM said of a real one (swtpm, tpm2-tools 5: tpm2_createprimary -C o -G ecc256:aes128cfb
/// with devtrust's SRK attributes, tpm2_create -G ecc256 under it, tpm2_load, tpm2_readpublic -n -q).
@Suite struct TPMObjectNamesTests {
    /// The key's TPM2B_PUBLIC (tpm2_create -u).
    static let keyPublicArea = "00560023000b000600720000001000100003001000205142945acc58bdf5d1b83684fa7765c7f41704eb2860cb6afd949762478b57e4"
        + "00200bb7ae3755b532fbc459dac4c8a1c1f5d933aac88a9b620cb8a9959e017b4482"
    static let keyName = "000bb5570466f4acb5439f46476ac700808c14cbf3f8eb2a16a1ae2d146fcbac5125"
    static let keyQualifiedName = "000bc8798c47298ae41a744d03925056bca03a1f07b4ed5c39866f2e533646d61c4f"
    static let parentName = "000b5e02f3ef3cd2fb17cdcbae9de1c12d1cbf32ab429a11b331aeea8d636f8d79d2"
    static let parentQualifiedName = "000b89ae860b0ebe0e31be6ade40e1d3eff5020fde90feb845653ae563e517f75625"

    @Test func theNamesAreTheOnesTheTPMGives() throws {
        let area = try #require(Hex.decode(Self.keyPublicArea)), parent = try #require(Hex.decode(Self.parentName))
        let name = try #require(TPMObjectNames.name(ofPublicArea: area))
        #expect(Hex.encode(name) == Self.keyName)
        let parentQualifiedName = try #require(TPMObjectNames.ownerPrimaryQualifiedName(of: parent))
        #expect(Hex.encode(parentQualifiedName) == Self.parentQualifiedName)
        let qualifiedName = try #require(TPMObjectNames.qualifiedName(of: name, under: parentQualifiedName))
        #expect(Hex.encode(qualifiedName) == Self.keyQualifiedName)
    }

    @Test func namesOfAnotherAlgorithmOrAMalformedAreaAreNotWorkedOut() throws {
        let area = try #require(Hex.decode(Self.keyPublicArea))
        var sha1Named = area
        sha1Named[5] = 0x04
        #expect(TPMObjectNames.name(ofPublicArea: sha1Named) == nil)
        #expect(TPMObjectNames.name(ofPublicArea: Array(area.dropLast())) == nil)
        #expect(TPMObjectNames.name(ofPublicArea: [0, 2, 0, 0x23]) == nil)
        #expect(TPMObjectNames.qualifiedName(of: [0, 4] + Array(repeating: 0, count: 20), under: [0x40, 0, 0, 1]) == nil)
    }
}
