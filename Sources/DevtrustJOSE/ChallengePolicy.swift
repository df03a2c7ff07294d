import DevtrustEncoding

/// What devtrust agrees to sign as a "challenge". The signature over a
/// challenge is ECDSA over SHA-256 of its bytes, exactly what an ES256 JWS
/// signs over "header.payload": a challenge that is a JWS signing input would
/// turn the answer into a device token of the attacker's choosing (for
/// another server, say). devtrust signs no such challenge.
public enum ChallengePolicy {
    /// Why `challenge` must not be signed, or nil when it may.
    public static func refusal(_ challenge: [UInt8]) -> String? {
        isJWSSigningInput(challenge) ? "it is a JWS signing input (header.payload): its signature would be a token" : nil
    }

    /// The Device Registration challenge of the server contract: 32 random
    /// bytes; 16 to 64 are accepted, nothing that could be a signing input.
    public static func registrationRefusal(_ challenge: [UInt8]) -> String? {
        if let refusal = refusal(challenge) { return refusal }
        guard (16...64).contains(challenge.count) else { return "it is \(challenge.count) bytes, where the contract sends 32 random bytes" }
        return nil
    }

    /// base64url "." base64url [...], whose first part is a JSON object.
    static func isJWSSigningInput(_ bytes: [UInt8]) -> Bool {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count >= 2, let header = try? Base64URL.decode(String(decoding: parts[0], as: UTF8.self), padding: .optional) else { return false }
        guard let value = try? JSONParser.parse(header), case .object = value else { return false }
        return true
    }
}
