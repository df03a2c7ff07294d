import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustKeys
import DevtrustSystem

/// `verify`: an ES256 compact JWS, or an ECDSA-SHA256 signature over a file.
/// Valid is success; invalid is `ExitCode.failure` (the reason on stderr); unusable inputs are a usage error.
enum VerifyCommand: DevtrustCommand {
    enum SignatureFormat: String, CaseIterable {
        case der, raw
    }

    struct Options: CommandOptions {
        static let publicKey = ValueOption<Self>("public-key", "SPKI_B64|PEM_FILE", .file, "the public key (as `devtrust pubkey` prints it, or a PEM file)")
        static let jwt = ValueOption<Self>("jwt", "TOKEN|-", .text, "the compact JWS to check (- reads stdin)")
        static let signature = ValueOption<Self>("signature", "SIG", .text, "a signature in standard base64")
        static let message = ValueOption<Self>("message", "FILE|-", .file, "the signed bytes (with --signature)")
        static let signatureFormat = ChoiceOption<Self, SignatureFormat>("signature-format", "der (default) or raw 64-byte r||s")
        static let maxAge = ValueOption<Self>("max-age", "SECONDS", .text, "also require jti and an iat at most this old")
        static let spec = CommandSpec(name: "verify", summary: "check an ES256 JWS or an ECDSA-SHA256 signature",
                                      options: [publicKey, jwt, signature, message, signatureFormat, maxAge],
                                      required: [.option(publicKey), .oneOf([jwt], [signature, message])])

        var publicKey: String?
        var jwt: String?
        var signature: String?
        var message: String?
        var signatureFormat: String?
        var maxAge: String?

        init(_ values: OptionValues<Self>) {
            publicKey = values[Self.publicKey]
            jwt = values[Self.jwt]
            signature = values[Self.signature]
            message = values[Self.message]
            signatureFormat = values[Self.signatureFormat]
            maxAge = values[Self.maxAge]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        guard let keyArgument = options.publicKey else {
            throw UsageError("--public-key is required", command: "verify")
        }
        let jwt = options.jwt
        let signature = options.signature
        let message = options.message
        guard (jwt != nil) != (signature != nil || message != nil) else {
            throw UsageError("give either --jwt, or --signature with --message", command: "verify")
        }
        if jwt == nil && (signature == nil || message == nil) {
            throw UsageError("--signature and --message go together", command: "verify")
        }
        if jwt != nil && options.signatureFormat != nil {
            throw UsageError("--signature-format applies to --signature, not --jwt", command: "verify")
        }
        let maxAge = try options.maxAge.map { text throws(UsageError) -> Int64 in
            guard let seconds = Int64(text), seconds > 0 else {
                throw UsageError("--max-age takes a positive number of seconds, not \"\(text)\"", command: "verify")
            }
            return seconds
        }
        let publicKey = try parsePublicKey(keyArgument)

        if let jwt {
            let token = try context.textArgument(jwt, name: "the JWT")
            let freshness = maxAge.map { (maxAge: $0, now: context.environment.clock.secondsSinceEpoch()) }
            do {
                let verified = try ES256Verifier(publicKey: publicKey).verify(compact: token, freshness: freshness)
                report(context, valid: true, reason: nil, header: verified.header, claims: verified.claims, key: publicKey)
            } catch {
                report(context, valid: false, reason: error.description, header: nil, claims: nil, key: publicKey)
                throw CLIError.invalid(error.description)
            }
        } else if let signature, let message {
            if maxAge != nil {
                throw UsageError("--max-age applies to --jwt only", command: "verify")
            }
            let format = try Options.signatureFormat.choice(options.signatureFormat) ?? .der
            let signatureBytes: [UInt8]
            do {
                signatureBytes = try Base64.decode(signature, padding: .optional)
            } catch {
                throw UsageError("--signature is not standard base64: \(error)", command: "verify")
            }
            let messageBytes = try readMessage(context, message)
            let reason: String?
            do {
                let parsed = format == .der ? try ECDSASignature(der: signatureBytes) : try ECDSASignature(raw: signatureBytes)
                reason = publicKey.isValidSignature(parsed, for: SHA256.hash(messageBytes)) ? nil : "the signature does not verify with this public key"
            } catch {
                reason = "bad \(format.rawValue) signature: \(error)"
            }
            report(context, valid: reason == nil, reason: reason, header: nil, claims: nil, key: publicKey)
            if let reason { throw CLIError.invalid(reason) }
        }
    }

    private static func report(_ context: CommandContext, valid: Bool, reason: String?, header: JSONObject?, claims: JSONObject?, key: P256PublicKey) {
        if context.json {
            var result: JSONObject = ["valid": .bool(valid)]
            if let reason { result["reason"] = .string(reason) }
            if let header { result["header"] = .object(header) }
            if let claims { result["claims"] = .object(claims) }
            result["keyFingerprint"] = .string(key.thumbprint)
            context.output(JSONWriter.string(.object(result)))
        }
        if valid { context.success("valid: signed by the key with fingerprint \(key.thumbprint)") }
    }

    /// A base64 SPKI (what `devtrust pubkey` prints), or a file holding a PEM
    /// public key, DER SPKI, or base64 SPKI.
    static func parsePublicKey(_ argument: String) throws -> P256PublicKey {
        let looksLikeBase64 = !argument.isEmpty && argument.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
        }
        do {
            if looksLikeBase64 && argument.count >= 80 || !FileReader.exists(argument) {
                guard let spki = try? Base64.decode(argument, padding: .optional) else {
                    throw UsageError("--public-key is neither a base64 SubjectPublicKeyInfo (as `devtrust pubkey` prints) nor a readable file", command: "verify")
                }
                return try P256PublicKey(spki: spki)
            }
            let contents: [UInt8]
            do {
                contents = try FileReader.read(argument, limit: 65_536)
            } catch {
                throw UsageError("--public-key: \(error)", command: "verify")
            }
            let text = String(decoding: contents, as: UTF8.self)
            if text.includes("-----BEGIN") { return try P256PublicKey(pem: text) }
            var trimmed = text
            while let last = trimmed.last, last.isWhitespace { trimmed.removeLast() }
            if let spki = try? Base64.decode(trimmed, padding: .optional) { return try P256PublicKey(spki: spki) }
            return try P256PublicKey(spki: contents)
        } catch let error as PublicKeyError {
            throw UsageError("--public-key: \(error)", command: "verify")
        }
    }

    private static func readMessage(_ context: CommandContext, _ path: String) throws -> [UInt8] {
        if path == "-" {
            guard let bytes = context.terminal.readInput(limit: 64 << 20) else {
                throw UsageError("--message on stdin is larger than 64 MiB", command: "verify")
            }
            return bytes
        }
        do {
            return try FileReader.read(path, limit: 64 << 20)
        } catch {
            throw UsageError("--message: \(error)", command: "verify")
        }
    }
}
