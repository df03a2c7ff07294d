import DevtrustHTTP
import DevtrustSignIn
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAppNativeResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// The app-native response parser, for a success and an error status.
func check(_ input: [UInt8]) {
    _ = try? AppNativeStep(response: HTTPResponse(status: 200, headers: [], body: input))
    _ = try? AppNativeStep(response: HTTPResponse(status: 400, headers: [], body: input))
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
