import CTPM2
import Synchronization

/// A TPM device key kept loaded in its TPM between signatures, for a process that signs many
/// times (the system agent): the TPM is opened and the key loaded once, so that each signature after
/// the first is a ReadPublic and a `Sign` (a `Load` costs a TPM chip as much as a Sign again).
/// `TPMDeviceKey` itself, which a command signs with once and exits, opens, loads and flushes for
/// every signature.
///
/// On a TPM without a resource manager that several programs reach at once (swtpm over TCP; the
/// kernel gives /dev/tpm0 to one process at a time) every program sees the key's transient handle: another can flush the key and load its own object, which then gets the same handle. So
/// before each signature the object at the handle is checked (one ReadPublic) to have the key's
/// name and qualified name (the key, under its parent: a public-only copy of it, which LoadExternal
/// makes, has the name but not the qualified name); a handle that holds another object, or one
/// the TPM will not read (a hash or HMAC sequence started there has no public area: any refusal
/// but a lost connection, an empty handle or a TPM warning), is let go without flushing it (it is
/// not this process's), and the key is loaded again, once, and signed with; never the object that
/// failed the check. The same for the names read right after a Load, and when the TPM lost the
/// key (restarted or reset: the connection breaks or the handle is empty). Every signature is also
/// verified with the key's public part (from the keystore's record) before it is returned: no
/// signature by another key ever leaves, even if another object takes the handle between the check
/// and the Sign.
///
/// The key holds one of the TPM's transient object slots (swtpm has three) until `release()`, which
/// the process calls when it stops. A process that is killed cannot: its key stays loaded. So before
/// loading the key, the TPM's transient objects are looked at, and one with the key's names is
/// taken back (and any other copy of the key flushed: it holds a slot for nothing): an agent
/// restarted after `kill -9` holds the same one slot.
public final class ResidentTPMKey: DeviceKey {
    public let key: TPMDeviceKey
    private let state = Mutex(State())

    /// The open TPM, the key loaded in it, and the names the TPM gave the key when it was loaded or
    /// taken back: what the object at its handle must have still.
    private struct State {
        var context: TPMContext?
        var object: ESYS_TR?
        var names: TPMObjectNames?
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
        return try state.withLock { state throws -> ECDSASignature in
            do {
                return try Self.sign(digest, key: key, state: &state)
            } catch let error where Self.meansKeyNotHeld(error) {
                // Lost with the TPM's restart, flushed or replaced by another program: loaded again, once.
                Self.forget(&state, error)
                do {
                    return try Self.sign(digest, key: key, state: &state)
                } catch let again where Self.meansKeyNotHeld(again) {
                    Self.forget(&state, again)
                    throw again
                }
            }
        }
    }

    /// Flushes the key from the TPM (when the object at its handle is still the key: another
    /// program's is let go of, not flushed) and closes the connection; a signature after it loads the
    /// key again.
    public func release() {
        state.withLock { state in
            if let context = state.context, let object = state.object {
                if let names = state.names, (try? context.names(of: object)) == names { context.flush(object) } else { context.forget(object) }
            }
            state.object = nil
            state.names = nil
            state.context = nil
        }
    }

    /// Whether the key is loaded in the TPM now.
    public var isLoaded: Bool {
        state.withLock { $0.object != nil }
    }

    /// Signs with the key at its handle, after checking that it is the key there (unless it was
    /// loaded or taken back just now), and verifies the signature with the key's public part.
    private static func sign(_ digest: SHA256Digest, key: TPMDeviceKey, state: inout State) throws -> ECDSASignature {
        let (context, object, justChecked) = try held(key, state: &state)
        if !justChecked, try currentNames(context, object) != state.names {
            throw TPMError.keyReplaced(handle: context.tpmHandle(of: object))
        }
        let signature = try context.sign(object, digest: digest)
        // The keystore's public key: nothing signed by another key leaves, whatever the TPM did.
        guard key.publicKey.isValidSignature(signature, for: digest) else { throw KeySelfTestFailure(backend: .tpm) }
        return signature
    }

    /// The open TPM and the key in it: opened, and taken back or loaded, when they are not; and
    /// whether its names were read from the TPM just now.
    private static func held(_ key: TPMDeviceKey, state: inout State) throws(TPMError) -> (TPMContext, ESYS_TR, justChecked: Bool) {
        let context: TPMContext
        if let open = state.context {
            context = open
        } else {
            context = try TPMContext.open(key.selection)
            state.context = context
        }
        if let object = state.object { return (context, object, false) }
        if let expected = key.loadedNames, let object = try takenBack(context, expected) {
            state.object = object
            state.names = expected
            return (context, object, true)
        }
        let object = try load(key, context)
        do throws(TPMError) {
            // ESAPI checked the name the TPM gave the key at Load against the key file's public area.
            // The names the TPM gives the object now are what it must have at each signature (those
            // worked out before only serve to recognise a copy already loaded: for a parent devtrust
            // did not make as an owner primary they would be wrong).
            let loadedName = try context.name(of: object)
            let names = try currentNames(context, object)
            guard names.name == loadedName else { throw .keyReplaced(handle: context.tpmHandle(of: object)) }
            state.object = object
            state.names = names
            return (context, object, true)
        } catch where error.isTPMWarning {
            // The TPM did not read it (busy, out of memory): nothing says another object is there, and
            // the key this process has just loaded would hold a slot for nothing. (An empty handle is
            // not a warning: another program flushed the key, and the handle may be its object's by
            // now: let go of, below.) A flush the TPM refuses lets go of it too, so that the context's
            // end flushes nothing at that handle blindly.
            if !context.flush(object) { context.forget(object) }
            throw error
        } catch {
            // Not flushed: another object may hold the handle by now; a copy of the key that is
            // still there is taken back when the key is loaded again.
            context.forget(object)
            throw error
        }
    }

    /// The names of the object at `object`'s handle now (one ReadPublic). A handle the TPM will not
    /// read does not hold the key: another program's object is there (a hash or HMAC sequence, which
    /// has no public area: TPM_RC_SEQUENCE), so the refusal is `keyReplaced`, as another key there is.
    /// Refusals that say nothing of the object pass as they are: a lost connection, an empty handle
    /// (the key was flushed: it is loaded again all the same), and a TPM warning (the TPM did not run
    /// the command now: busy, testing, out of memory), after which the key may well be there still:
    /// letting go of it would leave it loaded, a slot taken, beside the copy loaded next.
    private static func currentNames(_ context: TPMContext, _ object: ESYS_TR) throws(TPMError) -> TPMObjectNames {
        do throws(TPMError) {
            return try context.names(of: object)
        } catch where error.isConnectionLost || error.isObjectGone || error.isTPMWarning {
            throw error
        } catch {
            throw .keyReplaced(handle: context.tpmHandle(of: object))
        }
    }

    /// Identifies the parent, loads the key under it and lets the parent go (a loaded key needs it no more).
    private static func load(_ key: TPMDeviceKey, _ context: TPMContext) throws(TPMError) -> ESYS_TR {
        let parent = try key.identifiedParent(context)
        defer { parent.release(context) }
        return try context.load(key.keyFile, parent: parent.object)
    }

    /// The key already loaded in the TPM, as a process that was killed (or lost its connection) left
    /// it: the first transient object with the key's names, taken as this process's own. Any other
    /// copy of the key is flushed (it holds a slot for nothing: only root's processes can load the
    /// machine key, and one that signs directly with the machine keystore at this very moment loses
    /// its copy and fails, once); every other object is let go of, untouched.
    private static func takenBack(_ context: TPMContext, _ expected: TPMObjectNames) throws(TPMError) -> ESYS_TR? {
        let handles: [UInt32]
        do throws(TPMError) {
            handles = try context.transientHandles()
        } catch where !error.isConnectionLost {
            return nil  // a TPM that will not list them: the key is loaded, as before
        }
        var taken: ESYS_TR?
        do throws(TPMError) {
            for handle in handles {
                // An object that went meanwhile, or one ESAPI cannot read (another program's, of a
                // kind it does not know), is not the key; only a lost TPM ends the search.
                let object: ESYS_TR
                do throws(TPMError) {
                    guard let found = try context.transientObject(at: handle) else { continue }
                    object = found
                } catch where !error.isConnectionLost {
                    continue
                }
                let isKey: Bool
                do throws(TPMError) {
                    // ESAPI's name from the public area just read; the qualified name only for a candidate.
                    if try context.name(of: object) == expected.name {
                        isKey = try context.names(of: object) == expected
                    } else {
                        isKey = false
                    }
                } catch {
                    context.forget(object)
                    if error.isConnectionLost { throw error }
                    continue
                }
                if !isKey {
                    context.forget(object)
                } else if taken == nil {
                    taken = object
                } else {
                    context.flush(object)
                }
            }
        } catch {
            if let taken { context.forget(taken) }
            throw error
        }
        return taken
    }

    /// Whether `error` says that the key is not (or may not be) the object at its handle any more.
    private static func meansKeyNotHeld(_ error: any Error) -> Bool {
        if error is KeySelfTestFailure { return true }
        guard let error = error as? TPMError else { return false }
        return error.isConnectionLost || error.isObjectGone || error.isKeyReplaced
    }

    /// Lets go of a key the TPM may no longer hold at its handle, without flushing it (another object
    /// may have the handle by now; a copy of the key that is still there is taken back when it is
    /// loaded again); with the connection lost, of the connection too.
    private static func forget(_ state: inout State, _ error: any Error) {
        if let context = state.context, let object = state.object { context.forget(object) }
        state.object = nil
        state.names = nil
        if (error as? TPMError)?.isConnectionLost == true { state.context = nil }
    }
}

extension TPMError {
    /// The TPM holds no object at a handle the command named: TPM_RC_HANDLE, or TPM_RC_REFERENCE_H0-H6
    /// (a transient object that is not loaded).
    var isObjectGone: Bool {
        guard case let .commandFailed(_, code) = self, let tpmCode = code.tpmCode else { return false }
        return tpmCode == TPMResponseCode.handle || (0x910...0x916).contains(tpmCode)
    }

    /// A TPM warning (TPM_RC_WARN and its codes): the TPM did not run the command now (busy,
    /// testing, out of memory, in lockout), which says nothing about the objects it names.
    var isTPMWarning: Bool {
        switch self {
        case .busy, .lockout, .outOfObjectMemory, .outOfSessionMemory: return true
        // TPM_RC_REFERENCE_H0-H6 are warnings by their format, but say the object is gone (`isObjectGone`).
        case let .commandFailed(_, code): return code.tpmCode.map { $0 & 0x900 == 0x900 && !(0x910...0x916).contains($0) } ?? false
        default: return false
        }
    }

    var isKeyReplaced: Bool {
        if case .keyReplaced = self { return true }
        return false
    }
}
