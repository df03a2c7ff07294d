import DevtrustSignIn
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLoopbackRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    check(FuzzInput.bytes(data, size))
    return 0
}

/// What `login --browser`'s listener reads from any local client: a request head, and the
/// decision whether it ends the wait; the same bytes as a redirect URI.
func check(_ input: [UInt8]) {
    let limit = 4096
    let state = "s3cr3t-state"
    switch LoopbackRequest.read(input, limit: limit) {
    case .incomplete:
        precondition(input.count < limit, "an input of the limit's size is never incomplete")
    case .tooLarge, .malformed:
        break
    case let .request(request):
        if case .end = request.decision(path: "/callback", host: "127.0.0.1:5000", state: state) {
            // Only a GET of the redirect path, with its Host, ends the wait.
            precondition(request.method == "GET" && request.host?.lowercased() == "127.0.0.1:5000", "\(request) ended the wait")
            precondition(request.target == "/callback" || request.target.hasPrefix("/callback?"), "\(request) ended the wait")
        }
    }
    if let text = String(validating: input, as: UTF8.self), let redirect = LoopbackRedirect(text) {
        // The URI devtrust sends reads back as the same redirect, on the port it holds.
        let again = LoopbackRedirect(redirect.uri(port: 40123))
        precondition(again?.host == redirect.host && again?.path == redirect.path && again?.query == redirect.query && again?.port == 40123,
                     "\(text) does not read back")
    }
}

#if !FUZZING
@main enum Replay {
    static func main() { FuzzInput.replay(check) }
}
#endif
