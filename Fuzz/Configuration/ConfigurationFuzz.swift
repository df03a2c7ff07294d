import DevtrustConfig
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfiguration(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// The configuration file loader: a Configuration or a ConfigError, never a crash.
func check(_ input: [UInt8]) {
    _ = try? Configuration.parse(input, file: "/etc/devtrust/config.json")
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
