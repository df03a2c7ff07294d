import DevtrustKeystore
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeystore(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// The keystore manifest loader (keystore.json, versions 1 and 2); what it
/// accepts encodes to a manifest that decodes to the same state.
func check(_ input: [UInt8]) {
    guard let state = try? KeystoreFormat.decode(input, path: "keystore.json") else { return }
    let encoded = KeystoreFormat.encode(state)
    precondition((try? KeystoreFormat.decode(encoded, path: "keystore.json")) == state, "encode/decode round trip changed the keystore state")
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
