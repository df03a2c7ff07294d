import DevtrustEncoding
import DevtrustKeys
import Glibc
import DevtrustKeystore

/// A key file, read and checked, before it goes into the keystore.
public struct NewDeviceKey {
    public let key: any DeviceKey
    /// The file's contents (secret for a software key: zeroized after writing).
    public var file: [UInt8]
    public var tpmParent: [UInt8]?
    public var createdPersistentHandle: UInt32?
    public var notes: [String]
}

/// Turns key files into keys and makes new keys, for each backend.
public enum DeviceKeyFactory {
    /// Loads the key a record names from its file's bytes (which it zeroizes).
    public static func load(_ record: KeyRecord, file: inout [UInt8], path: String, tpm: TPMSelection,
                            random: any RandomSource = SystemRandom(), notices: TPMNotices? = nil) throws -> any DeviceKey {
        defer { file.zeroize() }
        let key: any DeviceKey
        switch record.backend {
        case .software:
            do {
                key = try SoftwareDeviceKey(pkcs8PEM: file, random: random)
            } catch let error as KeyFileError {
                throw KeystoreError.corrupt(path: path, detail: error.message)
            }
        case .tpm:
            do {
                // The fingerprint check below stands in for the on-curve check.
                key = try TPMDeviceKey(keyFile: try TSS2KeyFile(pem: String(decoding: file, as: UTF8.self)), selection: tpm,
                                       parentMetadata: record.tpmParent, validatingPoint: false, notices: notices)
            } catch let TPMError.unsupportedKey(reason) {
                throw KeystoreError.corrupt(path: path, detail: reason)
            }
        }
        guard key.fingerprint == record.fingerprint else {
            throw KeystoreError.corrupt(path: path, detail: "the key in the file (fingerprint \(key.fingerprint)) is not the one keystore.json records (\(record.fingerprint))")
        }
        return key
    }

    public static func createSoftwareKey(random: any RandomSource = SystemRandom()) throws -> NewDeviceKey {
        let key = try SoftwareDeviceKey.generate(random: random)
        return NewDeviceKey(key: key, file: try key.pkcs8PEM(), notes: [])
    }

    public static func createTPMKey(_ selection: TPMSelection, previousParent: TPMParentRecord? = nil) throws -> NewDeviceKey {
        let provisioning = try TPMKeyProvisioner.create(selection, previousParent: previousParent)
        return NewDeviceKey(key: provisioning.key, file: Array(provisioning.key.keyFile.pem.utf8), tpmParent: provisioning.key.parentMetadata,
                            createdPersistentHandle: provisioning.createdPersistentHandle, notes: provisioning.notes)
    }

    /// A key file made elsewhere: a TSS2 PRIVATE KEY (TPM) or a PKCS#8 P-256 key
    /// (software), checked more than the keystore's own files: the software
    /// key's private part must belong to its public part. Which it is, is
    /// decided by the BEGIN lines (a label quoted in a comment is not a block);
    /// a file with any other private key block is never made a String.
    public static func importKey(_ contents: [UInt8], source: String, selection: TPMSelection,
                                 random: any RandomSource = SystemRandom()) throws -> NewDeviceKey {
        let labels = PEM.labels(contents)
        if labels.contains("PRIVATE KEY") {
            return try importPKCS8(contents, source: source, random: random)
        }
        if let label = labels.first(where: { $0.hasSuffix("PRIVATE KEY") && $0 != TSS2KeyFile.pemLabel }) {
            throw KeyFileError(message: refusal(ofBlock: label, source: source))
        }
        if labels.contains(TSS2KeyFile.pemLabel) {
            // No secret in it (the TPM wraps the private part), so it may become a String.
            let provisioning = try TPMKeyProvisioner.adopt(try TSS2KeyFile(pem: String(decoding: contents, as: UTF8.self)), selection)
            return NewDeviceKey(key: provisioning.key, file: Array(provisioning.key.keyFile.pem.utf8), tpmParent: provisioning.key.parentMetadata,
                                notes: provisioning.notes)
        }
        throw KeyFileError(message: "\(source) is neither a TSS2 PRIVATE KEY (TPM) nor a PKCS#8 PRIVATE KEY PEM file")
    }

    private static func importPKCS8(_ contents: [UInt8], source: String, random: any RandomSource) throws -> NewDeviceKey {
        let key: SoftwareDeviceKey
        do {
            key = try SoftwareDeviceKey(pkcs8PEM: contents, random: random)
        } catch let error as KeyFileError {
            throw KeyFileError(message: "\(source): \(error.message); \(advice(error.cause, source: source))", cause: error.cause)
        }
        guard key.isConsistent else {
            throw KeyFileError(message: "\(source): its private key does not belong to the public key stored with it (the file is damaged or was altered); export the key again")
        }
        return NewDeviceKey(key: key, file: try key.pkcs8PEM(), notes: [])
    }

    /// What makes a refused PKCS#8 file importable: a command only where it gives something else back.
    private static func advice(_ cause: KeyFileError.Cause, source: String) -> String {
        let converted = convertedName(source)
        switch cause {
        case .damaged:
            return "the file is damaged, or its writer does not follow PKCS#8 and RFC 5915: export the key again"
        case .notP256:
            return "devtrust's device keys are P-256 (ES256): import a P-256 key, or let devtrust init make one"
        case .openSSLRewrites:
            return "OpenSSL reads it and writes it as devtrust reads it: openssl pkcs8 -topk8 -nocrypt -in \(shellQuoted(source)) -out \(shellQuoted(converted)), then import \(shellQuoted(converted))"
        case .explicitCurve:
            return "for a P-256 key, OpenSSL names the curve: openssl ec -in \(shellQuoted(source)) -param_enc named_curve | openssl pkcs8 -topk8 -nocrypt -out \(shellQuoted(converted)), then import \(shellQuoted(converted))"
        }
    }

    /// Where the advice's command writes the converted key: beside the source,
    /// never the source itself (openssl opens its output before it reads its
    /// input), nor a file that exists; in the current directory for a source
    /// like /dev/stdin.
    static func convertedName(_ source: String) -> String {
        var base = source.hasSuffix(".pem") ? String(source.dropLast(4)) : source
        if base.hasPrefix("/dev/") || base.hasPrefix("/proc/") { base = "devtrust-key" }
        var name = base + ".pkcs8.pem"
        var number = 2
        while access(name, F_OK) == 0 {
            name = base + ".pkcs8-\(number).pem"
            number += 1
        }
        return name
    }

    /// A private key block other than PKCS#8 and TSS2, and the command that converts it where one does.
    private static func refusal(ofBlock label: String, source: String) -> String {
        let converted = convertedName(source)
        let convert = "openssl pkcs8 -topk8 -nocrypt -in \(shellQuoted(source)) -out \(shellQuoted(converted))"
        switch label {
        case "ENCRYPTED PRIVATE KEY":
            return "\(source) is an encrypted PKCS#8 key; devtrust imports it unencrypted (its keystore file is readable by you alone): \(convert) decrypts it (it asks for the passphrase); then import \(shellQuoted(converted))"
        case "EC PRIVATE KEY":
            return "\(source) is an EC PRIVATE KEY (SEC1) file; devtrust imports PKCS#8: \(convert) converts it; then import \(shellQuoted(converted))"
        default:
            return "\(source) holds a -----BEGIN \(label)----- block: devtrust imports a PKCS#8 P-256 key (-----BEGIN PRIVATE KEY-----) or a TSS2 PRIVATE KEY"
        }
    }
}
