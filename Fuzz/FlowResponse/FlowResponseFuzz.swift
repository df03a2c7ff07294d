import DevtrustFlow
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlowResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// The flow response parser: any bytes give a FlowStep or an error, never a crash.
func check(_ input: [UInt8]) {
    _ = try? FlowStepParser.parse(input)
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
