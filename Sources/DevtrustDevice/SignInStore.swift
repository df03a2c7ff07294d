import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore

/// What a refresh of a sign-in's tokens came to, as the caller of
/// `DeviceStore.freshTokens` reads its server's answer.
public enum RefreshOutcome: Sendable {
    /// New tokens: saved before they are used.
    case renewed(TokenSet)
    /// The server says the grant is dead (`invalid_grant` from the token endpoint):
    /// the stored sign-in is deleted.
    case refused(reason: String)
    /// Any other failure (an outage, a proxy's answer, another refusal): the sign-in
    /// is kept, so that the next call can try again. `mayPass`: worth trying again
    /// in a while (an outage, a proxy's answer) rather than a refusal to fix.
    case failed(reason: String, mayPass: Bool)
}

/// Stored sign-ins: the record in keystore.json, the tokens in their own file.
extension DeviceStore {
    /// The id of a sign-in with (server or discovery URL, client id). A sign-in
    /// made with a discovery URL is keyed by that URL alone, not by the issuer
    /// that is also stored as its server: its id is the one earlier versions
    /// gave it (they stored no issuer), so that signing in again replaces it.
    public static func signInID(server: String?, discovery: String?, clientId: String) -> String {
        let key = discovery.map { "|\($0)|\(clientId)" } ?? "\(server ?? "")||\(clientId)"
        return String(Base64URL.encode(SHA256.hash(Array(key.utf8)).bytes).prefix(16))
    }

    /// Stores the tokens of a sign-in, replacing an earlier one with the same
    /// server (or discovery URL) and client. `server` is the base URL of a
    /// `--server` sign-in, or the issuer of a `--discovery` one.
    public func saveSignIn(server: String?, discovery: String?, clientId: String, scope: String, method: String, tokens: TokenSet) throws -> SignInRecord {
        let id = Self.signInID(server: server, discovery: discovery, clientId: clientId)
        let record = SignInRecord(id: id, server: server, discovery: discovery, clientId: clientId, scope: scope, method: method,
                                  file: SignInRecord.fileName(id: id), signedInAt: Timestamp.format(secondsSinceEpoch: clock.secondsSinceEpoch()))
        try keystore.update { state, staging in
            try staging.writeSignInFile(named: record.file, contents: tokens.bytes)
            state.signIns.removeAll { $0.id == id }
            state.signIns.append(record)
        }
        return record
    }

    /// The sign-in `--server URL|NAME` or `--discovery URL` names, or the only one.
    /// A sign-in made with a discovery URL answers to that URL and to its issuer
    /// (recorded as its server; for records of earlier versions, which have no
    /// issuer, the discovery URL's own: the URL without `/.well-known/...`), under
    /// either option. Where several answer, `--server` prefers those made with
    /// `--server` and `--discovery` those made with that discovery URL.
    /// - Parameter state: the keystore as already read (by `loadKey`), to spare reading it again.
    public func signIn(server: String?, discovery: String?, in state: KeystoreState? = nil) throws -> SignInRecord {
        let records = try (state ?? self.state()).signIns
        var candidates = records
        if let wanted = discovery ?? server {
            candidates = records.filter { Self.names(of: $0).contains { RegistrationSelector.matches($0, wanted) } }
            let preferred = candidates.filter { record in
                if discovery != nil { return record.discovery.map { RegistrationSelector.matches($0, wanted) } ?? false }
                return record.discovery == nil
            }
            if !preferred.isEmpty { candidates = preferred }
        }
        guard let first = candidates.first else { throw DeviceError.notSignedIn(server: server ?? discovery) }
        guard candidates.count == 1 else {
            throw DeviceError.ambiguousSignIn(names: candidates.map { "\($0.discovery ?? $0.server ?? "?") (client \($0.clientId))" })
        }
        return first
    }

    /// What a sign-in answers to: its server (or issuer), its discovery URL, and
    /// for a record without an issuer, the issuer its discovery URL implies.
    static func names(of record: SignInRecord) -> [String] {
        var names = [record.server, record.discovery].compactMap { $0 }
        if record.server == nil, let discovery = record.discovery, let issuer = DiscoveryURL.issuer(of: discovery) { names.append(issuer) }
        return names
    }

    public func tokens(of record: SignInRecord) throws -> TokenSet {
        guard let bytes = try keystore.readOwnedFile(record.file) else {
            throw KeystoreError.corrupt(path: keystore.path + "/" + record.file, detail: "the sign-in's token file is missing")
        }
        guard let tokens = TokenSet(bytes: bytes) else {
            throw KeystoreError.corrupt(path: keystore.path + "/" + record.file, detail: "not a devtrust token file")
        }
        return tokens
    }

    /// A valid access token: the stored one when it is good for `margin` more
    /// seconds, else refreshed under the keystore lock, so that concurrent
    /// callers refresh once; the rotated tokens are saved before they are used.
    /// Only a `.refused` refresh drops the stored tokens; a `.failed` one, or an
    /// error `refresh` throws (which passes through), keeps them.
    public func freshTokens(_ record: SignInRecord, margin: Int64, refresh: (TokenSet) throws -> RefreshOutcome) throws -> TokenSet {
        let stored = try tokens(of: record)
        if !stored.needsRefresh(at: clock.secondsSinceEpoch(), margin: margin) { return stored }
        let outcome: RefreshOutcome = try keystore.update { state, staging in
            guard let current = state.signIns.first(where: { $0.id == record.id }) else { throw DeviceError.notSignedIn(server: record.server ?? record.discovery) }
            guard let bytes = try staging.read(current.file), let tokens = TokenSet(bytes: bytes) else {
                throw KeystoreError.corrupt(path: keystore.path + "/" + current.file, detail: "the sign-in's token file is missing or damaged")
            }
            // Another caller may have refreshed while this one waited for the lock.
            if !tokens.needsRefresh(at: clock.secondsSinceEpoch(), margin: margin) { return .renewed(tokens) }
            let outcome = try refresh(tokens)
            switch outcome {
            case let .renewed(renewed):
                try staging.writeSignInFile(named: current.file, contents: renewed.bytes)
            case .refused:
                state.signIns.removeAll { $0.id == current.id }
            case .failed:
                break
            }
            return outcome
        }
        switch outcome {
        case let .renewed(tokens):
            return tokens
        case let .refused(reason):
            throw DeviceError.refreshRefused(reason)
        case let .failed(reason, mayPass):
            throw DeviceError.refreshFailed(place: record.server ?? record.discovery ?? "the server", reason: reason, mayPass: mayPass)
        }
    }

    /// Deletes a sign-in's record and tokens; returns the tokens (for revocation first).
    @discardableResult
    public func removeSignIn(_ record: SignInRecord) throws -> TokenSet? {
        let tokens = try? self.tokens(of: record)
        try keystore.update { state, _ in
            state.signIns.removeAll { $0.id == record.id }
        }
        return tokens
    }
}
