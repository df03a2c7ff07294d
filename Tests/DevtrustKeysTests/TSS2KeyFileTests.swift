import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// The optional TPMKey fields [1] to [5] (draft-bottomley-tpm2-keys), between
/// emptyAuth and parent: a description or rsaParent FALSE is read past, the
/// fields devtrust cannot honour are refused by name, not as a parse error.
@Suite struct TSS2KeyFileTests {
    static let fixture = Repository.path("keystore/fixtures/v1/tpm-key/key-xaNN-SNMrLkmHb-M.pem")

    @Test(arguments: TSS2KeyFileField.all.map(\.name))
    func optionalFieldsAreReadOrRefusedByName(name: String) throws {
        let field = try #require(TSS2KeyFileField.named(name))
        let original = try TSS2KeyFile(pem: try String(contentsOfFile: Self.fixture, encoding: .utf8))
        let text = try field.pem()
        if let refusal = field.refusal {
            #expect(throws: TPMError.unsupportedKey(refusal + "; use a key without a password, policies or secrets (`devtrust init --backend tpm` creates one)")) {
                try TSS2KeyFile(pem: text)
            }
        } else {
            #expect(try TSS2KeyFile(pem: text) == original)
        }
    }
}
