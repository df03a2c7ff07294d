import DevtrustKeys
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPrivateKeyFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// The software key file reader (PKCS#8 PEM, PKCS8.p256); a key it accepts
/// exports to a file it reads back the same.
func check(_ input: [UInt8]) {
    guard let key = try? SoftwareDeviceKey(pkcs8PEM: input) else { return }
    _ = key.isConsistent
    guard let exported = try? key.pkcs8PEM(), let again = try? SoftwareDeviceKey(pkcs8PEM: exported) else {
        preconditionFailure("a key that loaded does not export and reload")
    }
    precondition(again.publicKey == key.publicKey, "export changed the public key")
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
