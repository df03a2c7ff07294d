import DevtrustKeys
import DevtrustKeystore

/// Turns key files into keys and makes new keys, for each backend.
public enum DeviceKeyFactory {
    /// Loads the key a record names from its file's bytes (which it zeroizes).
    public static func load(_ record: KeyRecord, file: inout [UInt8], path: String) throws -> any DeviceKey {
        defer { file.zeroize() }
        let key: any DeviceKey
        switch record.backend {
        case .software:
            do {
                key = try SoftwareDeviceKey(pkcs8PEM: file)
            } catch let error as KeyFileError {
                throw KeystoreError.corrupt(path: path, detail: error.message)
            }
        case .tpm:
            throw KeystoreError.corrupt(path: path, detail: "this devtrust has no TPM backend")
        }
        guard key.fingerprint == record.fingerprint else {
            throw KeystoreError.corrupt(path: path, detail: "the key in the file (fingerprint \(key.fingerprint)) is not the one keystore.json records (\(record.fingerprint))")
        }
        return key
    }

    /// A new software key and the file that holds it (secret: zeroize after writing).
    public static func createSoftwareKey() throws -> (key: any DeviceKey, file: [UInt8]) {
        let key = try SoftwareDeviceKey.generate()
        return (key, try key.pkcs8PEM())
    }
}
