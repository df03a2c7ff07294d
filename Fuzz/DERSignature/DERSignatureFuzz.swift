import DevtrustKeys
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDERSignature(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// DER ECDSA-Sig-Value decoding is strict: whatever it accepts re-encodes to
/// the same bytes, and converts to raw r||s and back unchanged. Any 64 bytes
/// are also read as raw r||s.
func check(_ input: [UInt8]) {
    if input.count == 64, let raw = try? ECDSASignature(raw: input) {
        precondition(raw.raw == input, "raw r||s did not read back unchanged")
    }
    guard let signature = try? ECDSASignature(der: input) else { return }
    precondition(signature.der == input, "accepted a non-canonical DER signature")
    precondition((try? ECDSASignature(raw: signature.raw)) == signature, "raw round trip changed the signature")
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
