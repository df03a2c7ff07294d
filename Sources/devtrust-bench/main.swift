import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustPosture
import DevtrustSystem
import Glibc

// In-process measurements (no process start), for `make bench` and the notes:
//   devtrust-bench posture [N]   the whole posture collection, per call
//   devtrust-bench mint [SECONDS] device tokens minted per second with a software key
//   devtrust-bench tpm-sessions KEYSTORE [N]   a TPM key's signature on the password session
//       (what `devtrust token` does) against the self-test in an HMAC session salted to the
//       SRK (what init and status do), alternating; the TPM is DEVTRUST_TCTI's

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Seconds as milliseconds with two decimals.
func milliseconds(_ seconds: Double) -> String {
    let hundredths = Int((seconds * 1e5).rounded())
    return "\(hundredths / 100)." + (hundredths % 100 < 10 ? "0" : "") + "\(hundredths % 100)"
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
case "tpm-sessions" where arguments.count > 1:
    let count = arguments.count > 2 ? Int(arguments[2]) ?? 200 : 200
    let keystore = arguments[1]
    let manifest = try JSONParser.parse(try FileReader.read(keystore + "/keystore.json"))
    guard let record = manifest.objectValue?["key"]?.objectValue, let file = record["file"]?.stringValue,
          let parent = record["tpmParent"]?.stringValue else {
        print("tpm-sessions: \(keystore) holds no TPM key with a recorded parent")
        exit(2)
    }
    let environment = ["DEVTRUST_TCTI": getenv("DEVTRUST_TCTI").map { String(cString: $0) } ?? ""]
    let key = try TPMDeviceKey(keyFile: try TSS2KeyFile(pem: String(decoding: try FileReader.read(keystore + "/" + file), as: UTF8.self)),
                               selection: TPMSelection(explicit: nil, environment: environment), parentMetadata: try Base64.decode(parent))
    let digest = SHA256.hash(Array("devtrust bench".utf8))
    var password = [Double](), salted = [Double]()
    for round in 0..<(count + 5) {
        let startPassword = now()
        _ = try key.sign(digest: digest)
        let startSalted = now()
        try TPMKeyProvisioner.checkKeyLoads(key)
        if round >= 5 {
            password.append(startSalted - startPassword)
            salted.append(now() - startSalted)
        }
    }
    password.sort()
    salted.sort()
    print("password session \(milliseconds(password[count / 2])) ms, salted HMAC session \(milliseconds(salted[count / 2])) ms (medians of \(count))")
default:
    print("usage: devtrust-bench posture [N] | mint [SECONDS] | tpm-sessions KEYSTORE [N]")
    exit(2)
}
