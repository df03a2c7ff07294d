import COpenSSL
import DevtrustErrors

/// An OpenSSL call failed; `detail` is OpenSSL's own error queue, for logs and bug reports.
public struct OpenSSLError: Error, Equatable, Sendable, CustomStringConvertible {
    public let operation: String
    public let detail: String

    public var description: String {
        detail.isEmpty ? "OpenSSL: \(operation) failed" : "OpenSSL: \(operation) failed: \(detail)"
    }

    /// Captures and clears the thread's OpenSSL error queue.
    static func capture(_ operation: String) -> OpenSSLError {
        var messages = [String]()
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return OpenSSLError(operation: operation, detail: messages.joined(separator: "; "))
    }
}

extension OpenSSLError: ClassifiedError {
    /// A failure that is a bug or a broken OpenSSL: said so, with OpenSSL's queue as the detail.
    public var classification: ErrorClassification {
        ErrorClassification(.failure, summary: "a cryptographic operation failed (\(operation)); this is a bug or a broken OpenSSL installation, please report it",
                            detail: detail)
    }
}

enum OpenSSLLibrary {
    /// devtrust needs nothing from openssl.cnf, and reading it costs ~0.8 ms
    /// on every `devtrust token`; initialising first stops OpenSSL loading it.
    private static let initialized: Bool = OPENSSL_init_crypto(devtrust_OPENSSL_INIT_NO_LOAD_CONFIG(), nil) == 1

    static func ensureInitialized() {
        _ = initialized
    }

    static func clearErrors() {
        ERR_clear_error()
    }
}

/// Owns an `EVP_PKEY` and frees it with the last reference.
final class EVPKey: @unchecked Sendable {
    // Immutable after creation; OpenSSL 3 allows concurrent use of a key
    // that is not modified, each operation using its own EVP_PKEY_CTX.
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    var isP256: Bool {
        guard EVP_PKEY_is_a(pointer, "EC") == 1 else { return false }
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, OSSL_PKEY_PARAM_GROUP_NAME, &buffer, buffer.count, &length) == 1 else {
            OpenSSLLibrary.clearErrors()
            return false
        }
        let name = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name == "prime256v1" || name == "P-256"
    }

    /// The uncompressed public point, 0x04 || x || y.
    func uncompressedPublicPoint() throws(OpenSSLError) -> [UInt8] {
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pointer, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, &point, point.count, &length) == 1,
              length == 65, point[0] == 0x04 else {
            throw OpenSSLError.capture("reading the public point")
        }
        return point
    }
}
