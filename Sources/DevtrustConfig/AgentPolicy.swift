import DevtrustEncoding
import DevtrustErrors
import DevtrustSystem
import Glibc

/// The system agent's policy, `/etc/devtrust/agent.json` (docs/configuration.md, "The agent's
/// policy"): who may use the machine key through the agent, how often, and which claims a client
/// may add. Without the file: every local user, the default rate, no client claims.
public struct AgentPolicy: Equatable, Sendable {
    public static let defaultPath = "/etc/devtrust/agent.json"
    public static let knownFields = ["allowedGroups", "rateLimit", "allowedClientClaims"]

    /// The groups whose members may use the agent (by name, as written, with their gids); nil: every local user.
    public var allowedGroups: [(name: String, gid: UInt32)]?
    /// Requests one uid may make at once before it must wait (a browser restoring its tabs, a
    /// script's batch: a TPM signs them in 10-40 s)...
    public var burst = 60
    /// ...and how many more it may make each second after: what a person never meets and a loop
    /// does. A TPM signs 2-5 times a second (200-600 ms each); one user's loop is held to a part
    /// of that, and takes its turn with the others' requests (`AgentServer`).
    public var perSecond = 1
    /// Names a client may add with `--claim` (none by default); never one devtrust measures or reserves.
    public var allowedClientClaims: [String] = []
    /// The file this came from; nil: the built-in defaults (no file).
    public var source: String?

    public init(source: String? = nil) {
        self.source = source
    }

    public static func == (lhs: AgentPolicy, rhs: AgentPolicy) -> Bool {
        lhs.allowedGroups?.map(\.name) == rhs.allowedGroups?.map(\.name) && lhs.allowedGroups?.map(\.gid) == rhs.allowedGroups?.map(\.gid)
            && lhs.burst == rhs.burst && lhs.perSecond == rhs.perSecond && lhs.allowedClientClaims == rhs.allowedClientClaims && lhs.source == rhs.source
    }

    /// Reads the policy at `path` (`required`: named by the administrator, so it must exist; the
    /// default path may be absent: the defaults then). `group` looks a group's name up (getgrnam).
    public static func load(path: String, required: Bool, group: (String) -> UInt32? = AgentPolicy.groupID) throws(AgentPolicyError) -> AgentPolicy {
        // The policy says who may use the machine's key: only root (or the agent's user) may write it,
        // or put another in its place (its directory too, present or not yet).
        if let problem = FileTrust.directoryProblem(path: path) { throw AgentPolicyError(file: path, problem: .untrusted(problem)) }
        let read: (bytes: [UInt8], trustProblem: String?)
        do {
            read = try FileReader.readTrusted(path, limit: 64 * 1024)
        } catch {
            if error.isMissing && !required { return AgentPolicy() }
            throw AgentPolicyError(file: path, problem: error.isMissing ? .notFound : .unreadable(error.reason))
        }
        if let problem = read.trustProblem { throw AgentPolicyError(file: path, problem: .untrusted(problem)) }
        return try parse(read.bytes, file: path, group: group)
    }

    public static func parse(_ bytes: [UInt8], file: String, group: (String) -> UInt32? = AgentPolicy.groupID) throws(AgentPolicyError) -> AgentPolicy {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw AgentPolicyError(file: file, problem: .notJSON(error.description))
        }
        do throws(JSONFieldError) {
            let reader = try JSONObjectReader(document, path: "")
            try reader.rejectUnknownFields(known: knownFields)
            var policy = AgentPolicy(source: file)
            if reader.object["allowedGroups"] != nil && reader.object["allowedGroups"] != .null {
                var groups = [(name: String, gid: UInt32)]()
                for (index, value) in try reader.array("allowedGroups").enumerated() {
                    let path = "allowedGroups[\(index)]"
                    guard let name = value.stringValue else { throw JSONFieldError(path: path, kind: .invalidType(expected: "a group name", found: value.kindDescription)) }
                    guard let gid = group(name) else { throw JSONFieldError(path: path, kind: .invalidValue("there is no group \"\(name)\" on this machine")) }
                    groups.append((name, gid))
                }
                policy.allowedGroups = groups
            }
            if let rate = try reader.optionalObject("rateLimit") {
                try rate.rejectUnknownFields(known: ["burst", "perSecond"])
                for (key, path, range) in [("burst", \AgentPolicy.burst, 1...100_000), ("perSecond", \AgentPolicy.perSecond, 1...100_000)] {
                    guard rate.object[key] != nil else { continue }
                    let value = try rate.int(key)
                    guard range.contains(Int(value)) else {
                        throw JSONFieldError(path: rate.fieldPath(key), kind: .invalidValue("must be \(range.lowerBound) to \(range.upperBound)"))
                    }
                    policy[keyPath: path] = Int(value)
                }
            }
            if reader.object["allowedClientClaims"] != nil {
                for (index, value) in try reader.array("allowedClientClaims").enumerated() {
                    let path = "allowedClientClaims[\(index)]"
                    guard let name = value.stringValue else { throw JSONFieldError(path: path, kind: .invalidType(expected: "a claim name", found: value.kindDescription)) }
                    if let problem = ClaimName.givenClaimProblem(with: name) { throw JSONFieldError(path: path, kind: .invalidValue(problem)) }
                    policy.allowedClientClaims.append(name)
                }
            }
            return policy
        } catch {
            throw AgentPolicyError(file: file, problem: .field(error))
        }
    }

    /// A group's gid by name (the system's group database).
    public static func groupID(_ name: String) -> UInt32? {
        guard let entry = getgrnam(name) else { return nil }
        return entry.pointee.gr_gid
    }

    /// Whether `policy` lets a user in: every local user without `allowedGroups`; else a member
    /// of one of them, by the user's groups (`groups`: their primary and supplementary gids).
    public func allows(groups: [UInt32]) -> Bool {
        guard let allowedGroups else { return true }
        return allowedGroups.contains { groups.contains($0.gid) }
    }

    /// What a refused user is told: the policy, its file, and who decides.
    public func refusal(uid: UInt32) -> AgentPolicyRefusal {
        AgentPolicyRefusal(uid: uid, file: source ?? Self.defaultPath, groups: allowedGroups?.map(\.name) ?? [])
    }

    /// What a uid without an account is told (`why`: that it has none, or that the user database
    /// did not answer). The agent serves only root and uids with an account, whatever the policy
    /// says: a uid without one (a user namespace's subordinate uids, /etc/subuid: 65536 a user)
    /// would otherwise bring its own rate and connections, and one person could be thousands.
    public func refusalWithoutAccount(uid: UInt32, why: String) -> AgentPolicyRefusal {
        AgentPolicyRefusal(uid: uid, file: source ?? Self.defaultPath, groups: [], withoutAccount: why)
    }
}

/// A policy file that cannot be used: the agent does not start with it (exit 2, as a bad configuration).
public struct AgentPolicyError: Error, Equatable, Sendable, CustomStringConvertible {
    public let file: String
    public let problem: ConfigError.Problem

    public init(file: String, problem: ConfigError.Problem) {
        self.file = file
        self.problem = problem
    }

    public var description: String {
        switch problem {
        case .notFound: return "the agent's policy \(file) does not exist (given by --policy)"
        case let .unreadable(reason): return "cannot read the agent's policy \(file): \(reason)"
        case let .untrusted(reason):
            // A directory others can write to is the one to fix: they could put another policy in its place.
            let fix = reason.hasPrefix("is in ") ? (file.lastIndex(of: "/").map { String(file[..<$0]) } ?? ".") : file
            return "the agent's policy \(file) \(reason): it says who may use this machine's key, so only root (or the agent's user) may be able to change it (chmod go-w \(fix.isEmpty ? "/" : fix))"
        case let .notJSON(reason): return "the agent's policy \(file) is not valid JSON: \(reason)"
        case let .field(error): return "the agent's policy \(file): \(error); see docs/configuration.md"
        }
    }
}

extension AgentPolicyError: ClassifiedError {
    public var classification: ErrorClassification { ErrorClassification(.configuration, summary: description) }
}

/// A user the agent's policy does not let in (exit 3): said with the policy's file, and nothing else.
public struct AgentPolicyRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    public let uid: UInt32
    public let file: String
    public let groups: [String]
    /// Why the uid counts as one without an account (refused before any group is looked at); nil:
    /// it has one, and is not in the policy's groups.
    public var withoutAccount: String?

    public var description: String { classification.message }
}

extension AgentPolicyRefusal: ClassifiedError {
    public var classification: ErrorClassification {
        let why = withoutAccount.map { ": it serves only root and users with an account on this machine, and \($0)" }
            ?? (groups.isEmpty ? "" : ": it allows members of \(groups.joined(separator: ", ")) only")
        return ErrorClassification(.notPermitted, summary: "the devtrust agent's policy (\(file)) does not let uid \(uid) use this machine's key" + why,
                                   hint: ErrorHint("ask the machine's administrator", joinedBy: "; "))
    }
}
