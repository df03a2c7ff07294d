import DevtrustKeys
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

    public static func createTPMKey(_ selection: TPMSelection) throws -> NewDeviceKey {
        let provisioning = try TPMKeyProvisioner.create(selection)
        return NewDeviceKey(key: provisioning.key, file: Array(provisioning.key.keyFile.pem.utf8), tpmParent: provisioning.key.parentMetadata,
                            createdPersistentHandle: provisioning.createdPersistentHandle, notes: provisioning.notes)
    }

    /// A key file made elsewhere: a TSS2 PRIVATE KEY (TPM) or a PKCS#8 P-256 key
    /// (software), checked more than the keystore's own files: the software
    /// key's private part must belong to its public part.
    public static func importKey(_ contents: [UInt8], source: String, selection: TPMSelection,
                                 random: any RandomSource = SystemRandom()) throws -> NewDeviceKey {
        if contents.includes(Array("-----BEGIN \(TSS2KeyFile.pemLabel)-----".utf8)) {
            // No secret in it (the TPM wraps the private part), so it may become a String.
            let provisioning = try TPMKeyProvisioner.adopt(try TSS2KeyFile(pem: String(decoding: contents, as: UTF8.self)), selection)
            return NewDeviceKey(key: provisioning.key, file: Array(provisioning.key.keyFile.pem.utf8), tpmParent: provisioning.key.parentMetadata,
                                notes: provisioning.notes)
        }
        if contents.includes(Array("-----BEGIN PRIVATE KEY-----".utf8)) {
            let key: SoftwareDeviceKey
            do {
                key = try SoftwareDeviceKey(pkcs8PEM: contents, random: random)
            } catch let error as KeyFileError {
                throw KeyFileError(message: "\(source): \(error.message); export the key again as unencrypted PKCS#8 (a key OpenSSL reads: openssl pkcs8 -topk8 -nocrypt -in \(source) -out key.pem)")
            }
            guard key.isConsistent else {
                throw KeyFileError(message: "\(source): its private key does not belong to the public key stored with it (the file is damaged or was altered); export the key again")
            }
            return NewDeviceKey(key: key, file: try key.pkcs8PEM(), notes: [])
        }
        throw KeyFileError(message: "\(source) is neither a TSS2 PRIVATE KEY (TPM) nor a PKCS#8 PRIVATE KEY PEM file")
    }
}
