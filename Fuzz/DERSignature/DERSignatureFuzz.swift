import DevtrustKeys
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDERSignature(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// DER ECDSA-Sig-Value decoding is strict: whatever it accepts re-encodes to
/// the same bytes, and converts to raw r||s and back unchanged.
func check(_ input: [UInt8]) {
    guard let signature = try? ECDSASignature(der: input) else { return }
    precondition(signature.der == input, "accepted a non-canonical DER signature")
    precondition((try? ECDSASignature(raw: signature.raw)) == signature, "raw round trip changed the signature")
    if input.count == 64 { _ = try? ECDSASignature(raw: input) }
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
