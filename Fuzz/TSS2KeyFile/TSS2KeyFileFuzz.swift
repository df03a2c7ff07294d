import DevtrustKeys
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTSS2KeyFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// The TSS2 PRIVATE KEY parser (PEM and DER); what it accepts re-encodes to a
/// file it reads back the same.
func check(_ input: [UInt8]) {
    if let file = try? TSS2KeyFile(der: input) {
        precondition((try? TSS2KeyFile(der: file.der)) == file, "DER round trip changed the key file")
    }
    if let file = try? TSS2KeyFile(pem: String(decoding: input, as: UTF8.self)) {
        precondition((try? TSS2KeyFile(pem: file.pem)) == file, "PEM round trip changed the key file")
    }
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
