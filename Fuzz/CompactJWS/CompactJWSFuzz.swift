import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCompactJWS(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// Compact JWS parsing and ES256 verification with a fixed key (RFC 7515 A.3).
let publicKey = try! P256PublicKey(x: Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"),
                                   y: Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"))

func check(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    if let parsed = try? ParsedJWS(compact: text) { _ = try? parsed.claims() }
    _ = try? ES256Verifier(publicKey: publicKey).verify(compact: text)
    _ = try? ES256Verifier(publicKey: publicKey).verify(compact: text, freshness: (maxAge: 300, now: 1_796_000_000))
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
