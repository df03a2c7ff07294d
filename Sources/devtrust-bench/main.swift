import DevtrustJOSE
import DevtrustKeys
import DevtrustPosture
import Glibc

// In-process measurements (no process start), for `make bench` and the notes:
//   devtrust-bench posture [N]   the whole posture collection, per call
//   devtrust-bench mint [SECONDS] device tokens minted per second with a software key

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "posture":
    let count = arguments.count > 1 ? Int(arguments[1]) ?? 2000 : 2000
    let input = PostureInput(effectiveUserID: 1000, home: getenv("HOME").map { String(cString: $0) }, keyProtection: "software")
    _ = PostureCollector.collect(input)
    var samples = [Double]()
    for _ in 0..<count {
        let start = now()
        _ = PostureCollector.collect(input)
        samples.append(now() - start)
    }
    samples.sort()
    print("posture collection: median \(Int(samples[count / 2] * 1e6)) µs, p90 \(Int(samples[count * 9 / 10] * 1e6)) µs over \(count) calls")
case "mint":
    let seconds = arguments.count > 1 ? Double(arguments[1]) ?? 3 : 3
    let key = try SoftwareDeviceKey.generate()
    let minter = DeviceTokenMinter(key: key)
    var attributes = DeviceAttributes()
    attributes.set("linuxOsVersion", "12")
    var minted = 0
    let start = now()
    while now() - start < seconds {
        _ = try minter.deviceToken(deviceId: "74070bae-df8c-42bf-8754-5173c237c936", attributes: attributes)
        minted += 1
    }
    print("minted \(minted) tokens in \(seconds) s: \(Int(Double(minted) / (now() - start))) per second")
default:
    print("usage: devtrust-bench posture [N] | mint [SECONDS]")
    exit(2)
}
