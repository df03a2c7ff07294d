import DevtrustSystem

/// `secureBoot` from the EFI variables, `trustedPlatformModule` from sysfs,
/// `keyProtection` from the device key.
enum FirmwareCollector {
    static let globalVariableGUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

    static func secureBoot(_ input: PostureInput) -> Attribute {
        guard DirectoryListing.isDirectory(input.path("/sys/firmware/efi")) else {
            return .absent("secureBoot", "no /sys/firmware/efi: the machine booted without UEFI (BIOS), so there is no Secure Boot")
        }
        let directory = "/sys/firmware/efi/efivars"
        guard let names = DirectoryListing.names(input.path(directory)), !names.isEmpty else {
            return .absent("secureBoot", "\(directory) is empty or unreadable (efivarfs not mounted)")
        }
        let secureBootPath = "\(directory)/SecureBoot-\(globalVariableGUID)"
        guard let secureBoot = variable(input.path(secureBootPath)) else {
            if !names.contains("SecureBoot-\(globalVariableGUID)") {
                return Attribute(name: "secureBoot", value: "false", source: "UEFI without a SecureBoot variable: the firmware has no Secure Boot")
            }
            return .absent("secureBoot", "\(secureBootPath) is not a 5-byte EFI variable")
        }
        if let setupMode = variable(input.path("\(directory)/SetupMode-\(globalVariableGUID)")), setupMode == 1 {
            return Attribute(name: "secureBoot", value: "false", source: "SetupMode is 1: the firmware is in setup mode, nothing is enforced")
        }
        switch secureBoot {
        case 1: return Attribute(name: "secureBoot", value: "true", source: "\(secureBootPath) = 1")
        case 0: return Attribute(name: "secureBoot", value: "false", source: "\(secureBootPath) = 0")
        default: return .absent("secureBoot", "\(secureBootPath) holds \(secureBoot), neither 0 nor 1")
        }
    }

    /// An efivarfs file: 4 attribute bytes, then the value byte.
    static func variable(_ path: String) -> UInt8? {
        guard let bytes = try? FileReader.read(path, limit: 64), bytes.count == 5 else { return nil }
        return bytes[4]
    }

    static func trustedPlatformModule(_ input: PostureInput) -> Attribute {
        let directory = "/sys/class/tpm"
        guard let devices = DirectoryListing.names(input.path(directory)) else {
            if DirectoryListing.isDirectory(input.path("/sys/class")) {
                return Attribute(name: "trustedPlatformModule", value: "false", source: "no \(directory): the kernel sees no TPM")
            }
            return .absent("trustedPlatformModule", "/sys is not available")
        }
        var unknown = [String]()
        for device in devices where device.hasPrefix("tpm") {
            let path = "\(directory)/\(device)/tpm_version_major"
            guard let bytes = try? FileReader.read(input.path(path), limit: 16) else { unknown.append(device); continue }
            if String(decoding: bytes, as: UTF8.self).trimmingWhitespace == "2" {
                return Attribute(name: "trustedPlatformModule", value: "true", source: "\(path) = 2")
            }
        }
        if !unknown.isEmpty {
            return .absent("trustedPlatformModule", "cannot tell the version of \(unknown.joined(separator: ", ")) (no tpm_version_major)")
        }
        return Attribute(name: "trustedPlatformModule", value: "false", source: devices.isEmpty ? "\(directory) is empty" : "no TPM 2.0 in \(directory)")
    }

    static func keyProtection(_ input: PostureInput) -> Attribute {
        guard let backend = input.keyProtection else { return .absent("keyProtection", "there is no device key") }
        return Attribute(name: "keyProtection", value: backend, source: "the device key's backend in the keystore")
    }
}

extension String {
    var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
