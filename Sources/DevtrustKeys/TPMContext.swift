import CTPM2
import Glibc

/// An open connection to a TPM (TCTI + ESAPI context). Every transient object
/// and session a caller creates must be flushed before the context goes: a TPM
/// without a resource manager (swtpm, /dev/tpm0) keeps it, and has only 3
/// object slots. The context keeps the TPM handles of those it made and did
/// not flush, and flushes them on a fresh connection when it goes: after some
/// errors (a response that fails its HMAC) ESAPI refuses every further call.
final class TPMContext {
    let esys: OpaquePointer
    private var tcti: OpaquePointer?
    let tctiConfiguration: String
    private let functions: UnsafePointer<devtrust_tss2>
    private var tss: devtrust_tss2 { functions.pointee }
    /// Transient objects and sessions made here and not flushed yet, by their TPM handles.
    private var unflushed = [ESYS_TR: UInt32]()

    private init(esys: OpaquePointer, tcti: OpaquePointer, tctiConfiguration: String, functions: UnsafePointer<devtrust_tss2>) {
        self.esys = esys
        self.tcti = tcti
        self.tctiConfiguration = tctiConfiguration
        self.functions = functions
    }

    deinit {
        var context: OpaquePointer? = esys
        tss.Esys_Finalize(&context)
        tss.Tss2_TctiLdr_Finalize(&tcti)
        guard !unflushed.isEmpty, let fresh = try? TPMContext.open(TPMSelection(tcti: tctiConfiguration)) else { return }
        for handle in Set(unflushed.values) {
            var object: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
            guard fresh.tss.Esys_TR_FromTPMPublic(fresh.esys, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &object) == 0 else { continue }
            _ = fresh.tss.Esys_FlushContext(fresh.esys, object)
        }
    }

    /// Remembers a transient object or session this context made, until it is flushed.
    private func track(_ object: ESYS_TR) {
        var handle: TPM2_HANDLE = 0
        if tss.Esys_TR_GetTpmHandle(esys, object, &handle) == 0 { unflushed[object] = handle }
    }

    /// Opens the first TPM of `selection` that answers.
    static func open(_ selection: TPMSelection) throws(TPMError) -> TPMContext {
        // The TSS logs its failures to stderr itself; devtrust reports them in
        // its own words. TSS2_LOG set by the user still wins.
        setenv("TSS2_LOG", "all+NONE", 0)
        let functions = try TSS2Library.load()
        let tss = functions.pointee
        var failures = [TPMError]()
        for candidate in selection.candidates {
            if let problem = TPMSelection.deviceProblem(candidate) {
                failures.append(.unreachable(tcti: candidate, reason: problem.reason, hint: problem.hint))
                continue
            }
            var tcti: OpaquePointer?
            let direct = TPMSelection.moduleFileConfiguration(candidate)
            var loaded = tss.Tss2_TctiLdr_Initialize(direct ?? candidate, &tcti)
            // No module by that file name: the name as tctildr looks for it.
            if direct != nil && Self.isModuleMissing(TPMResponseCode(loaded)) {
                tcti = nil
                loaded = tss.Tss2_TctiLdr_Initialize(candidate, &tcti)
            }
            guard loaded == 0, let tcti else {
                failures.append(unreachable(candidate, TPMResponseCode(loaded)))
                continue
            }
            var esys: OpaquePointer?
            let initialized = tss.Esys_Initialize(&esys, tcti, nil)
            guard initialized == 0, let esys else {
                var owned: OpaquePointer? = tcti
                tss.Tss2_TctiLdr_Finalize(&owned)
                failures.append(unreachable(candidate, TPMResponseCode(initialized)))
                continue
            }
            return TPMContext(esys: esys, tcti: tcti, tctiConfiguration: candidate, functions: functions)
        }
        // The first candidate's failure is the one that matters (the device);
        // the default's fallback to tabrmd only adds that it is not there either.
        throw failures.first ?? .unreachable(tcti: "(none)", reason: "no TCTI configured", hint: nil)
    }

    /// NOT_IMPLEMENTED, NOT_SUPPORTED: tctildr found no such TCTI module.
    private static func isModuleMissing(_ code: TPMResponseCode) -> Bool {
        code.tssBaseCode == 2 || code.tssBaseCode == 21
    }

    private static func unreachable(_ configuration: String, _ code: TPMResponseCode) -> TPMError {
        let name = String(configuration.split(separator: ":", maxSplits: 1).first ?? "")
        switch code.tssBaseCode {
        case 2?, 21?: // NOT_IMPLEMENTED, NOT_SUPPORTED: no such TCTI module
            // A mistyped name is no package to install.
            if !TPMSelection.knownTCTINames.contains(name) && !TPMSelection.namesLibrary(name) {
                let unknown = TPMSelection.unknownTCTI(name)
                return .unreachable(tcti: configuration, reason: unknown.reason, hint: unknown.hint)
            }
            // A library named by its file: no package name can be made from it.
            if TPMSelection.namesLibrary(name) {
                return .unreachable(tcti: configuration, reason: "no TCTI library \"\(name)\" can be loaded",
                                    hint: "check the name or path (`ldconfig -p | grep libtss2-tcti` lists those installed), or name a TCTI: device, swtpm, mssim, tabrmd")
            }
            return .unreachable(tcti: configuration, reason: "the TCTI library for \"\(name)\" is not installed",
                                hint: name == "tabrmd" ? "install tpm2-abrmd, or use the kernel's resource manager (device:/dev/tpmrm0)" : "install libtss2-tcti-\(name)0")
        case 8?, 10?: // NO_CONNECTION, IO_ERROR
            let hint = name == "tabrmd" ? "the tpm2-abrmd daemon is not running" : name == "swtpm" || name == "mssim" ? "start the simulator, or fix host and port" : nil
            return .unreachable(tcti: configuration, reason: "nothing answers", hint: hint)
        default:
            return .unreachable(tcti: configuration, reason: "\(code)", hint: nil)
        }
    }

    func check(_ rc: TSS2_RC, _ operation: String, ownerAuthorized: Bool = false) throws(TPMError) {
        if rc != 0 { throw TPMError.from(rc, operation: operation, ownerAuthorized: ownerAuthorized) }
    }

    /// Flushes an object of this context; whether the TPM did (if not, it is still remembered, and
    /// flushed when the context goes).
    @discardableResult
    func flush(_ object: ESYS_TR) -> Bool {
        guard tss.Esys_FlushContext(esys, object) == 0 else { return false }
        unflushed[object] = nil
        return true
    }

    /// Lets go of ESAPI's record of an object the TPM no longer holds (no TPM command): it is not
    /// flushed, here or when the context goes, as its handle may be another object's by now.
    func forget(_ object: ESYS_TR) {
        unflushed[object] = nil
        var object = object
        _ = tss.Esys_TR_Close(esys, &object)
    }

    /// The TPM's handle of an object of this context.
    func tpmHandle(of object: ESYS_TR) -> UInt32? {
        var handle: TPM2_HANDLE = 0
        return tss.Esys_TR_GetTpmHandle(esys, object, &handle) == 0 ? handle : nil
    }

    /// The transient object the TPM holds at `handle` (one ReadPublic), to be flushed or forgotten
    /// like one this context loaded; nil when it holds none there.
    func transientObject(at handle: UInt32) throws(TPMError) -> ESYS_TR? {
        var object: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        let rc = tss.Esys_TR_FromTPMPublic(esys, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &object)
        let error = rc == 0 ? nil : TPMError.from(rc, operation: "reading the object at \(TPMHandle.format(handle)) (ReadPublic)")
        if let error, error.isObjectGone { return nil }
        if let error { throw error }
        track(object)
        return object
    }

    /// The name and qualified name the TPM gives the object it holds at `object`'s handle now (one
    /// ReadPublic, no session): another object than the one ESAPI knows there, when another program
    /// flushed it and loaded its own (a TPM without a resource manager). ESAPI takes them as the object's.
    func names(of object: ESYS_TR) throws(TPMError) -> TPMObjectNames {
        var name = [UInt8](repeating: 0, count: 68), qualifiedName = [UInt8](repeating: 0, count: 68)
        var nameSize: UInt16 = 0, qualifiedNameSize: UInt16 = 0
        try check(devtrust_read_public_names(functions, esys, object, &name, &nameSize, &qualifiedName, &qualifiedNameSize),
                  "reading the object at \(tpmHandle(of: object).map(TPMHandle.format) ?? "its handle") (ReadPublic)")
        return TPMObjectNames(name: Array(name.prefix(Int(nameSize))), qualifiedName: Array(qualifiedName.prefix(Int(qualifiedNameSize))))
    }

    /// The handles of the transient objects the TPM holds (GetCapability): every program's, on a TPM
    /// without a resource manager; only this connection's through one.
    func transientHandles() throws(TPMError) -> [UInt32] {
        var handles = [UInt32](repeating: 0, count: 64)
        var count: UInt32 = 0
        try check(devtrust_transient_handles(functions, esys, &handles, UInt32(handles.count), &count), "listing the TPM's transient objects (GetCapability)")
        return Array(handles.prefix(Int(count)))
    }

    /// The persistent object at `handle`, or nil when there is none.
    func persistentObject(_ handle: UInt32) throws(TPMError) -> ESYS_TR? {
        var object: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        let rc = tss.Esys_TR_FromTPMPublic(esys, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &object)
        if TPMResponseCode(rc).tpmCode == TPMResponseCode.handle { return nil }
        try check(rc, "reading the object at \(TPMHandle.format(handle))")
        return object
    }

    /// A primary key from the SRK template in the owner hierarchy (transient: flush it).
    func createStorageRootKey() throws(TPMError) -> ESYS_TR {
        var sensitive = devtrust_empty_sensitive()
        var template = devtrust_srk_template()
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var object: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        try check(tss.Esys_CreatePrimary(esys, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                     &sensitive, &template, &outsideInfo, &creationPCR, &object, nil, nil, nil, nil),
                  "creating the storage root key (CreatePrimary)", ownerAuthorized: true)
        track(object)
        return object
    }

    /// The recorded parent made again from its own public area as the template
    /// (transient: flush it), and whether its unique field was zero-filled; nil
    /// when this TPM derives another key from it now (its seed changed:
    /// cleared), or it was not a primary key.
    func recreate(_ record: TPMParentRecord) throws(TPMError) -> (object: ESYS_TR, zeroUnique: Bool)? {
        for zeroUnique: Int32 in [0, 1] {
            var object: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
            let rc = record.publicArea.withUnsafeBufferPointer {
                devtrust_create_primary_from(functions, esys, $0.baseAddress!, $0.count, zeroUnique, &object)
            }
            guard rc == 0 else {
                // A template this TPM refuses (an error about a parameter: the template), or a variant
                // devtrust cannot make of it (ESAPI's bad value), is not the one; anything else (the TPM
                // lost, an owner password, a disabled hierarchy) is an answer.
                let error = TPMError.from(rc, operation: "recreating the storage root key (CreatePrimary)", ownerAuthorized: true)
                if case let .commandFailed(_, code) = error, code.isParameterError || code.raw == TPMResponseCode.esapiBadValue { continue }
                throw error
            }
            track(object)
            if try name(of: object, releasingOnError: .init(object: object, isTransient: true)) == record.name { return (object, zeroUnique == 1) }
            flush(object)
        }
        return nil
    }

    /// Makes a transient object persistent at `handle`; returns the persistent object.
    func persist(_ object: ESYS_TR, at handle: UInt32) throws(TPMError) -> ESYS_TR {
        var persistent: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        try check(tss.Esys_EvictControl(esys, ESYS_TR(ESYS_TR_RH_OWNER), object, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                    handle, &persistent),
                  "making the storage root key persistent at \(TPMHandle.format(handle)) (EvictControl)", ownerAuthorized: true)
        return persistent
    }

    /// An HMAC session salted to `key` (see devtrust_start_salted_session): answers
    /// to commands run in it are authenticated. The caller flushes it.
    func startSaltedSession(saltedTo key: ESYS_TR) throws(TPMError) -> ESYS_TR {
        var session: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        try check(devtrust_start_salted_session(functions, esys, key, &session), "starting a session salted to the storage root key (StartAuthSession)")
        track(session)
        return session
    }

    /// The name ESAPI holds for `object`: nameAlg || SHA-256 of its public area.
    func name(of object: ESYS_TR) throws(TPMError) -> [UInt8] {
        var name = [UInt8](repeating: 0, count: 68)
        var size: UInt16 = 0
        try check(devtrust_object_name(functions, esys, object, &name, &size), "Esys_TR_GetName")
        return Array(name.prefix(Int(size)))
    }

    /// The name of `object`, releasing `parent` (which holds it) when it cannot be read.
    func name(of object: ESYS_TR, releasingOnError parent: TPMDeviceKey.ParentObject) throws(TPMError) -> [UInt8] {
        try releasing(parent) { () throws(TPMError) in try name(of: object) }
    }

    /// `body`'s result; `object` released when it throws.
    func releasing<Value>(_ object: TPMDeviceKey.ParentObject, onError body: () throws(TPMError) -> Value) throws(TPMError) -> Value {
        do {
            return try body()
        } catch {
            object.release(self)
            throw error
        }
    }

    /// The marshalled TPM2B_PUBLIC of a loaded object, read inside `session` so that the answer is authenticated.
    func readPublic(_ object: ESYS_TR, session: ESYS_TR) throws(TPMError) -> [UInt8] {
        var area = [UInt8](repeating: 0, count: 1024)
        var size = 0
        try check(devtrust_read_public_in_session(functions, esys, object, session, &area, &size), "reading the device key's public area (ReadPublic)")
        return Array(area.prefix(size))
    }

    /// Creates the device key under `parent`, authorized by `session` (an HMAC
    /// session salted to the parent, so the public area that comes back is the
    /// TPM's); only its wrapped blob comes out.
    func createSigningKey(parent: ESYS_TR, parentHandle: UInt32, session: ESYS_TR) throws(TPMError) -> TSS2KeyFile {
        var sensitive = devtrust_empty_sensitive()
        var template = devtrust_signing_key_template()
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var privatePart: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var publicPart: UnsafeMutablePointer<TPM2B_PUBLIC>?
        try check(tss.Esys_Create(esys, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                  &sensitive, &template, &outsideInfo, &creationPCR, &privatePart, &publicPart, nil, nil, nil),
                  "creating the device key (Create)")
        defer {
            tss.Esys_Free(privatePart)
            tss.Esys_Free(publicPart)
        }
        guard let privatePart, let publicPart else { throw .unsupportedKey("the TPM returned no key") }
        return try TSS2KeyFile.marshal(public: publicPart.pointee, private: privatePart.pointee, parent: parentHandle)
    }

    /// Loads a key blob under `parent`, authorized by `session` (the password
    /// session by default); the caller must flush the result.
    func load(_ keyFile: TSS2KeyFile, parent: ESYS_TR, session: ESYS_TR = ESYS_TR(ESYS_TR_PASSWORD)) throws(TPMError) -> ESYS_TR {
        var privatePart = try keyFile.unmarshalledPrivate()
        var publicPart = try keyFile.unmarshalledPublic()
        var object: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        let rc = tss.Esys_Load(esys, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &privatePart, &publicPart, &object)
        switch TPMResponseCode(rc).tpmCode {
        case TPMResponseCode.integrity?, TPMResponseCode.value?:
            throw .keyDoesNotLoad(code: TPMResponseCode(rc))
        default:
            try check(rc, "loading the device key under its parent (Load)")
        }
        track(object)
        return object
    }

    /// Signs `digest` with a loaded key, authorized by `session` (the password session by default).
    func sign(_ key: ESYS_TR, digest: SHA256Digest, session: ESYS_TR = ESYS_TR(ESYS_TR_PASSWORD)) throws(TPMError) -> ECDSASignature {
        var r = [UInt8](repeating: 0, count: 66), s = [UInt8](repeating: 0, count: 66)
        var rSize: UInt16 = 0, sSize: UInt16 = 0
        try check(devtrust_sign_digest(functions, esys, key, session, digest.bytes, &r, &rSize, &s, &sSize), "signing (Sign)")
        do {
            return try ECDSASignature(r: Array(r.prefix(Int(rSize))), s: Array(s.prefix(Int(sSize))))
        } catch {
            throw .commandFailed(operation: "signing (Sign): the TPM returned an invalid signature (\(error))", code: TPMResponseCode(0))
        }
    }

    /// ESAPI's description of an object (handle, name, public area): the parent record.
    func serialize(_ object: ESYS_TR) throws(TPMError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        var size = 0
        try check(tss.Esys_TR_Serialize(esys, object, &buffer, &size), "Esys_TR_Serialize")
        defer { free(buffer) }
        guard let buffer else { return [] }
        return Array(UnsafeBufferPointer(start: buffer, count: size))
    }

    /// Releases ESAPI's record of a persistent object (no TPM command).
    func close(_ object: ESYS_TR) {
        var object = object
        _ = tss.Esys_TR_Close(esys, &object)
    }

    func property(_ property: UInt32) throws(TPMError) -> UInt32 {
        var value: UInt32 = 0
        try check(devtrust_tpm_property(functions, esys, property, &value), "GetCapability")
        return value
    }
}
