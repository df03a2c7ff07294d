import DevtrustEncoding
import Foundation

/// A real TSS2 PRIVATE KEY (keystore/fixtures/v1/tpm-key) rewritten with one of
/// the optional TPMKey fields [1] to [5] of draft-bottomley-tpm2-keys (between
/// emptyAuth and parent), to test what devtrust does with each.
public struct TSS2KeyFileField: Sendable {
    public let name: String
    /// The field's DER ([n] EXPLICIT ...).
    public let der: [UInt8]
    /// What the refusal says; nil when devtrust reads the key anyway.
    public let refusal: String?

    static let loadableKeyOID: [UInt8] = [0x67, 0x81, 0x05, 0x0A, 0x01, 0x03]

    public static let all: [TSS2KeyFileField] = {
        let policy = DERWriter.element(tag: 0x30, DERWriter.element(tag: 0xA0, DERWriter.unsignedInteger(0x17F))
                                       + DERWriter.element(tag: 0xA1, DERWriter.element(tag: 0x04, [UInt8](repeating: 0xAB, count: 32))))
        return [
            TSS2KeyFileField(name: "policy", der: DERWriter.element(tag: 0xA1, DERWriter.element(tag: 0x30, policy)),
                             refusal: "TSS2 keys with a TPM policy (TPMKey [1] policy) are not supported"),
            TSS2KeyFileField(name: "secret", der: DERWriter.element(tag: 0xA2, DERWriter.element(tag: 0x04, [UInt8](repeating: 0x5C, count: 48))),
                             refusal: "TSS2 keys with an imported secret (TPMKey [2] secret) are not supported"),
            TSS2KeyFileField(name: "authPolicy", der: DERWriter.element(tag: 0xA3, DERWriter.element(tag: 0x30, DERWriter.element(tag: 0x30,
                                 DERWriter.element(tag: 0xA0, DERWriter.element(tag: 0x0C, Array("unlock".utf8)))
                                 + DERWriter.element(tag: 0xA1, DERWriter.element(tag: 0x30, policy))))),
                             refusal: "TSS2 keys with signed authorization policies (TPMKey [3] authPolicy) are not supported"),
            TSS2KeyFileField(name: "rsaParent", der: DERWriter.element(tag: 0xA5, DERWriter.boolean(true)),
                             refusal: "TSS2 keys with an RSA parent (TPMKey [5] rsaParent) are not supported"),
            TSS2KeyFileField(name: "unknown [6]", der: DERWriter.element(tag: 0xA6, DERWriter.element(tag: 0x05, [])),
                             refusal: "TSS2 keys with a field devtrust does not know (TPMKey [6]) are not supported"),
            TSS2KeyFileField(name: "description", der: DERWriter.element(tag: 0xA4, DERWriter.element(tag: 0x0C, Array("laptop key".utf8))), refusal: nil),
            TSS2KeyFileField(name: "rsaParent false", der: DERWriter.element(tag: 0xA5, DERWriter.boolean(false)), refusal: nil),
        ]
    }()

    public static func named(_ name: String) -> TSS2KeyFileField? { all.first { $0.name == name } }

    /// The fixture's key file with this field.
    public func pem() throws -> String {
        let text = try String(contentsOfFile: Repository.path("keystore/fixtures/v1/tpm-key/key-xaNN-SNMrLkmHb-M.pem"), encoding: .utf8)
        var outer = DERReader(PEM.decode(text, label: "TSS2 PRIVATE KEY") ?? [])
        var key = try outer.readConstructed(tag: 0x30, "TPMKey")
        _ = try key.read(tag: 0x06, "type")
        _ = try key.readConstructed(tag: 0xA0, "emptyAuth")
        let parent = try key.readUnsignedInteger("parent")
        let publicArea = try key.read(tag: 0x04, "pubkey"), privateArea = try key.read(tag: 0x04, "privkey")
        let der = DERWriter.element(tag: 0x30, DERWriter.element(tag: 0x06, Self.loadableKeyOID) + DERWriter.element(tag: 0xA0, DERWriter.boolean(true))
                                    + self.der + DERWriter.unsignedInteger(parent)
                                    + DERWriter.element(tag: 0x04, publicArea) + DERWriter.element(tag: 0x04, privateArea))
        return PEM.encode(der, label: "TSS2 PRIVATE KEY")
    }
}
