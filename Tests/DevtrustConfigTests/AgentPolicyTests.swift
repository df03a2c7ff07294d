import DevtrustConfig
import DevtrustTestSupport
import Foundation
import Testing

/// The system agent's policy file (`/etc/devtrust/agent.json`): its defaults, its fields, and
/// typed errors that name the file and the field, as the configuration file's do.
@Suite struct AgentPolicyTests {
    static func groups(_ name: String) -> UInt32? {
        ["staff": 50, "devtrust": 990][name]
    }

    @Test func defaultsLetEveryLocalUserInAtARateAPersonNeverMeets() throws {
        let policy = try AgentPolicy.parse(Array("{}".utf8), file: "/p.json", group: Self.groups)
        #expect(policy.allowedGroups == nil && policy.allowedClientClaims.isEmpty && policy.source == "/p.json")
        #expect(policy.burst == 60 && policy.perSecond == 1)
        #expect(policy.allows(groups: []) && policy.allows(groups: [1234]))
        // No file at the default path: the defaults; one the administrator named must be there.
        #expect(try AgentPolicy.load(path: "/nonexistent/agent.json", required: false) == AgentPolicy())
        #expect(throws: AgentPolicyError(file: "/nonexistent/agent.json", problem: .notFound)) {
            try AgentPolicy.load(path: "/nonexistent/agent.json", required: true)
        }
    }

    @Test func fieldsAreReadAsWritten() throws {
        let text = #"{"allowedGroups": ["staff", "devtrust"], "rateLimit": {"burst": 30, "perSecond": 2}, "allowedClientClaims": ["ticket", "site"]}"#
        let policy = try AgentPolicy.parse(Array(text.utf8), file: "/p.json", group: Self.groups)
        #expect(policy.allowedGroups?.map(\.name) == ["staff", "devtrust"] && policy.allowedGroups?.map(\.gid) == [50, 990])
        #expect(policy.burst == 30 && policy.perSecond == 2 && policy.allowedClientClaims == ["ticket", "site"])
        #expect(policy.allows(groups: [7, 990]) && !policy.allows(groups: [7, 8]))
        #expect(policy.refusal(uid: 1001).classification.message
                == "the devtrust agent's policy (/p.json) does not let uid 1001 use this machine's key: it allows members of staff, devtrust only; ask the machine's administrator")
        #expect(policy.refusal(uid: 1001).classification.category == .notPermitted)
    }

    @Test(arguments: [
        (#"{"allowedGroups": ["nogroup-here"]}"#, "the agent's policy /p.json: field \"allowedGroups[0]\": there is no group \"nogroup-here\" on this machine; see docs/configuration.md"),
        (#"{"allowedGroups": [50]}"#, "field \"allowedGroups[0]\" must be a group name, found a number"),
        (#"{"allowedGroups": "staff"}"#, "field \"allowedGroups\" must be an array"),
        (#"{"rateLimit": {"burst": 0}}"#, "field \"rateLimit.burst\": must be 1 to 100000"),
        (#"{"rateLimit": {"perMinute": 5}}"#, "unknown field \"rateLimit.perMinute\""),
        (#"{"allowedClientClaims": ["diskEncryption"]}"#, "field \"allowedClientClaims[0]\": diskEncryption is measured by devtrust"),
        (#"{"allowedClientClaims": ["jti"]}"#, "field \"allowedClientClaims[0]\": jti is set by devtrust"),
        (#"{"allowedClientClaims": ["platform"]}"#, "field \"allowedClientClaims[0]\": platform is set by devtrust itself"),
        (#"{"allowedGroup": []}"#, "unknown field \"allowedGroup\" (known fields: allowedGroups, rateLimit, allowedClientClaims)"),
        ("[]", "field \"(top level)\" must be an object"),
        ("{", "the agent's policy /p.json is not valid JSON"),
    ])
    func typedErrorsNameTheFieldAndFile(text: String, message: String) {
        do {
            let policy = try AgentPolicy.parse(Array(text.utf8), file: "/p.json", group: Self.groups)
            Issue.record("accepted \(text): \(policy)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
            #expect(error.classification.category == .configuration)
        }
    }

    /// Who may use the machine's key is written by root (or the agent's user) alone.
    @Test func aPolicyOthersCanChangeIsRefused() throws {
        let directory = TemporaryDirectory()
        let file = directory.write("agent.json", "{}", mode: 0o666)
        #expect {
            try AgentPolicy.load(path: file, required: true)
        } throws: { error in
            guard let error = error as? AgentPolicyError, case .untrusted = error.problem else { return false }
            return error.description.contains("only root (or the agent's user) may be able to change it (chmod go-w \(file))")
        }
    }

    /// Nor may anyone else put another policy in its place: a directory others can write to (without
    /// the sticky bit) is refused, whether the policy is there yet or not.
    @Test func aPolicyInADirectoryOthersCanWriteIsRefused() throws {
        let directory = TemporaryDirectory()
        chmod(directory.path, 0o777)
        let file = directory.write("agent.json", "{}", mode: 0o644)
        for required in [true, false] {
            if !required { unlink(file) }
            #expect {
                try AgentPolicy.load(path: file, required: required)
            } throws: { error in
                guard let error = error as? AgentPolicyError, case .untrusted = error.problem else { return false }
                return error.description.contains("is in \(directory.path), which others can write to (mode 777)")
                    && error.description.hasSuffix("(chmod go-w \(directory.path))")
            }
        }
        chmod(directory.path, 0o755)
        #expect(try AgentPolicy.load(path: file, required: false).source == nil)
    }
}
