import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore

/// The device key with the keystore state it was read with.
public struct LoadedDevice: Sendable {
    public let state: KeystoreState
    public let record: KeyRecord
    public let key: any DeviceKey
}

/// Which backend `init` should use.
public enum BackendChoice: String, Sendable {
    case auto, tpm, software
}

/// What `init` did.
public enum InitOutcome: Sendable {
    case created(KeyRecord, dropped: [RegistrationRecord])
    case kept(KeyRecord)
}

/// The device's identity in one keystore: its key, whichever backend holds it,
/// and its registrations.
public struct DeviceStore: Sendable {
    public let keystore: Keystore
    public let clock: any Clock

    public init(keystore: Keystore, clock: any Clock = SystemClock()) {
        self.keystore = keystore
        self.clock = clock
    }

    /// The committed state; empty when there is no keystore yet.
    public func state() throws -> KeystoreState {
        try keystore.load() ?? .empty
    }

    /// The device key, ready to sign.
    public func loadKey() throws -> LoadedDevice {
        guard var snapshot = try keystore.loadWithKey(), let record = snapshot.state.key, var file = snapshot.keyFile else {
            throw DeviceError.noDeviceKey(keystore: keystore.path)
        }
        snapshot.keyFile = nil
        let key = try DeviceKeyFactory.load(record, file: &file, path: keystore.path + "/" + record.file)
        return LoadedDevice(state: snapshot.state, record: record, key: key)
    }

    /// Creates the device key unless one exists; `force` replaces it and drops
    /// the registrations made with the old key, in the same commit.
    public func initialize(backend choice: BackendChoice, force: Bool) throws -> InitOutcome {
        try keystore.update { state, staging in
            if let existing = state.key, !force {
                if choice != .auto && choice.rawValue != existing.backend.rawValue {
                    throw DeviceError.keyExistsWithOtherBackend(existing: existing.backend.rawValue, requested: choice.rawValue)
                }
                return .kept(existing)
            }
            var created = try DeviceKeyFactory.createSoftwareKey()
            defer { created.file.zeroize() }
            let fingerprint = created.key.fingerprint
            let record = KeyRecord(backend: created.key.backend, file: KeyRecord.fileName(fingerprint: fingerprint),
                                   fingerprint: fingerprint, createdAt: Timestamp.format(secondsSinceEpoch: clock.secondsSinceEpoch()))
            try staging.writeKeyFile(named: record.file, contents: created.file)
            let dropped = state.registrations
            state.key = record
            state.registrations = []
            return .created(record, dropped: dropped)
        }
    }

    /// Deletes the key and the registrations; returns what there was.
    public func reset() throws -> KeystoreState {
        guard try keystore.load() != nil else { return .empty }
        return try keystore.update { state, _ in
            let previous = state
            state = .empty
            return previous
        }
    }
}
