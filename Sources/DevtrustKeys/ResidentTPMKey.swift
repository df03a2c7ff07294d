import CTPM2
import Synchronization

/// A TPM device key kept loaded in its TPM between signatures, for a process that signs many
/// times (the system agent): the TPM is opened, the parent identified (its ReadPublic) and the key
/// loaded once, so that each signature after the first is one `Sign` (a `Load` costs a TPM chip as
/// much as a Sign again). `TPMDeviceKey` itself, which a command signs with once and exits, opens,
/// loads and flushes for every signature.
///
/// The TPM can lose the loaded key: it restarted or was reset (a connection that breaks, or an
/// answer that the handle is gone), or another program flushed it. The key is then loaded again
/// once, from the same key file under the same identified parent, and the signature tried again;
/// a key the TPM holds under another name than the one loaded first is never signed with, and every
/// signature is verified with the key's public part (from the keystore's record) before it is
/// returned, so that no signature by another key ever leaves.
///
/// It holds one of the TPM's transient object slots (a TPM without a resource manager, such as
/// swtpm or /dev/tpm0, has three) until `release()`, which the process calls when it stops.
public final class ResidentTPMKey: DeviceKey {
    public let key: TPMDeviceKey
    private let state = Mutex(State())

    /// The open TPM, the key loaded in it, and the name it was first loaded with (the TPM's name
    /// for the key file's public area, which ESAPI checks against the file at `Load`).
    private struct State {
        var context: TPMContext?
        var object: ESYS_TR?
        var name: [UInt8]?
        /// The TPM handle the key had in a connection that was lost: the TPM may hold it still.
        var lostHandle: UInt32?
    }

    public var backend: KeyBackend { .tpm }
    public var publicKey: P256PublicKey { key.publicKey }

    public init(_ key: TPMDeviceKey) {
        self.key = key
    }

    deinit {
        release()
    }

    public func sign(digest: SHA256Digest) throws -> ECDSASignature {
        let key = self.key
        let signature = try state.withLock { state throws(TPMError) -> ECDSASignature in
            do throws(TPMError) {
                return try Self.sign(digest, key: key, state: &state)
            } catch let error where error.isConnectionLost || error.isObjectGone {
                // Lost with the TPM's restart, or flushed by another program: loaded again, once.
                Self.forget(&state, connectionLost: error.isConnectionLost)
                do throws(TPMError) {
                    return try Self.sign(digest, key: key, state: &state)
                } catch let again where again.isConnectionLost || again.isObjectGone {
                    Self.forget(&state, connectionLost: again.isConnectionLost)
                    throw again
                }
            }
        }
        // The keystore's public key: nothing signed by another key leaves, whatever the TPM did.
        guard key.publicKey.isValidSignature(signature, for: digest) else { throw KeySelfTestFailure(backend: .tpm) }
        return signature
    }

    /// Flushes the key from the TPM and closes the connection; a signature after it loads the key again.
    public func release() {
        state.withLock { state in
            if let context = state.context, let object = state.object { context.flush(object) }
            state.object = nil
            state.context = nil
        }
    }

    /// Whether the key is loaded in the TPM now.
    public var isLoaded: Bool {
        state.withLock { $0.object != nil }
    }

    private static func sign(_ digest: SHA256Digest, key: TPMDeviceKey, state: inout State) throws(TPMError) -> ECDSASignature {
        let (context, object) = try loaded(key, state: &state)
        return try context.sign(object, digest: digest)
    }

    /// The open TPM and the key in it: opened, and loaded, when they are not.
    private static func loaded(_ key: TPMDeviceKey, state: inout State) throws(TPMError) -> (TPMContext, ESYS_TR) {
        let context: TPMContext
        if let open = state.context {
            context = open
        } else {
            context = try TPMContext.open(key.selection)
            state.context = context
        }
        if let object = state.object { return (context, object) }
        let object: ESYS_TR
        if let reclaimed = try reclaimed(context, state: &state) {
            object = reclaimed
        } else {
            object = try load(key, context)
        }
        let name: [UInt8]
        do throws(TPMError) {
            name = try context.name(of: object)
        } catch {
            context.flush(object)
            throw error
        }
        if let expected = state.name, expected != name {
            context.flush(object)
            throw .responseNotAuthentic(operation: "loading the device key again: the TPM names it differently from when it was first loaded")
        }
        state.name = name
        state.object = object
        return (context, object)
    }

    /// Identifies the parent, loads the key under it and lets the parent go (a loaded key needs it no more).
    private static func load(_ key: TPMDeviceKey, _ context: TPMContext) throws(TPMError) -> ESYS_TR {
        let parent = try key.identifiedParent(context)
        defer { parent.release(context) }
        return try context.load(key.keyFile, parent: parent.object)
    }

    /// After a lost connection to a TPM that kept running, the key is still loaded at its handle:
    /// taken again when the object there has the key's name, so that it neither holds a slot for
    /// nothing nor is loaded twice; an object of another name is not this process's to touch.
    private static func reclaimed(_ context: TPMContext, state: inout State) throws(TPMError) -> ESYS_TR? {
        guard let handle = state.lostHandle, let name = state.name else { return nil }
        state.lostHandle = nil
        guard let object = try context.transientObject(at: handle) else { return nil }
        if (try? context.name(of: object)) == name { return object }
        context.forget(object)
        return nil
    }

    /// Lets go of a key the TPM no longer holds, without flushing its handle (another object may
    /// have it by now); with the connection lost, of the connection too.
    private static func forget(_ state: inout State, connectionLost: Bool) {
        if let context = state.context, let object = state.object {
            if connectionLost { state.lostHandle = context.tpmHandle(of: object) }
            context.forget(object)
        }
        state.object = nil
        if connectionLost { state.context = nil }
    }
}

extension TPMError {
    /// The TPM holds no object at a handle the command named: TPM_RC_HANDLE, or TPM_RC_REFERENCE_H0-H6
    /// (a transient object that is not loaded).
    var isObjectGone: Bool {
        guard case let .commandFailed(_, code) = self, let tpmCode = code.tpmCode else { return false }
        return tpmCode == TPMResponseCode.handle || (0x910...0x916).contains(tpmCode)
    }
}
