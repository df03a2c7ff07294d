import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys
import Glibc

/// How a front end reaches the device key: through the system agent, or in a keystore of its own.
public enum DeviceKeyAccess: Sendable {
    case agent(AgentClient)
    case keystore

    /// The one rule (docs/usage.md, "The system agent"): `--keystore DIR` means that keystore (with
    /// `--agent` too, a usage error); `--agent PATH` that agent; then `DEVTRUST_KEYSTORE` that
    /// keystore; `DEVTRUST_AGENT` that agent; then the agent's default socket when it exists (one
    /// `stat`, and only when nothing above named anything); else the user's own keystore.
    /// - Parameters:
    ///   - keystore: `--keystore`; `agent`: `--agent`; `command`: whose help a usage error points at.
    public static func choose(keystore: String?, agent: String?, variables: [String: String], defaultSocket: String?,
                              command: String) throws -> DeviceKeyAccess {
        let named = keystore.flatMap { $0.isEmpty ? nil : $0 }
        if let agent {
            guard named == nil else {
                throw UsageError("--keystore and --agent name two different places for the device key: give one", command: command)
            }
            guard !agent.isEmpty else { throw UsageError("--agent needs the agent's socket path", command: command) }
            return .agent(AgentClient(socket: agent))
        }
        if named != nil { return .keystore }
        if variables["DEVTRUST_KEYSTORE"].map({ !$0.isEmpty }) == true { return .keystore }
        if let agent = variables["DEVTRUST_AGENT"], !agent.isEmpty { return .agent(AgentClient(socket: agent)) }
        if let defaultSocket {
            var status = stat()
            if stat(defaultSocket, &status) == 0 { return .agent(AgentClient(socket: defaultSocket)) }
        }
        return .keystore
    }
}

extension AgentClient {
    /// The machine key's public key.
    public func publicKey() throws -> P256PublicKey {
        let result = try call(.publicKey)
        guard let text = result["publicKey"]?.stringValue, let spki = try? Base64.decode(text, padding: .required),
              let key = try? P256PublicKey(spki: spki) else {
            throw AgentUnavailable(socket: socket, reason: .unreadableReply("no public key in its answer"))
        }
        return key
    }

    /// A device token for one of the caller's registrations (`server`, `deviceID`: which), with the
    /// claims the agent's policy allows clients to add.
    public func token(server: String?, deviceID: String?, claims: [(String, String)]) throws -> String {
        let result = try call(.token(server: server, deviceID: deviceID, claims: claims.map { GivenClaim(name: $0.0, value: $0.1) }))
        guard let token = result["token"]?.stringValue else { throw AgentUnavailable(socket: socket, reason: .unreadableReply("no token in its answer")) }
        return token
    }
}
