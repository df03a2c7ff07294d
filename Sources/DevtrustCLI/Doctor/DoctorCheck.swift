import DevtrustEncoding

/// How one `doctor` check came out. Only `fail` makes doctor exit 1: `warn`
/// is something that limits devtrust or will bite later, `skip` a check that
/// does not apply here (no TPM checks for a software key on a machine without one).
enum DoctorVerdict: String, Sendable, CaseIterable {
    case pass, warn, fail, skip

    /// The mark a line of human output starts with.
    var mark: String {
        switch self {
        case .pass: "[pass]"
        case .warn: "[warn]"
        case .fail: "[FAIL]"
        case .skip: "[skip]"
        }
    }
}

/// One check's outcome: a stable id for scripts, what was found, and what to
/// do about it (nil on a pass, and on a skip that needs nothing done).
struct DoctorCheck: Sendable, Equatable {
    let id: String
    let title: String
    let verdict: DoctorVerdict
    let detail: String
    let fix: String?

    init(_ id: String, _ title: String, _ verdict: DoctorVerdict, _ detail: String, fix: String? = nil) {
        self.id = id
        self.title = title
        self.verdict = verdict
        self.detail = detail
        self.fix = verdict == .pass ? nil : fix
    }

    /// A check that could not be made because `error` was thrown: what the
    /// error says failed, and the fix it names (`fallbackFix` when it names none).
    static func failed(_ id: String, _ title: String, _ error: any Error, verdict: DoctorVerdict = .fail, fallbackFix: String) -> DoctorCheck {
        let explained = DoctorExplanation(error)
        return DoctorCheck(id, title, verdict, explained.detail, fix: explained.fix ?? fallbackFix)
    }

    /// `[FAIL] id: detail`, and the fix indented below it.
    var text: String {
        var text = "\(verdict.mark) \(id): \(detail)"
        if let fix { text += "\n       fix: \(fix)" }
        return text
    }

    var json: JSONValue {
        .object(["id": .string(id), "title": .string(title), "verdict": .string(verdict.rawValue),
                 "detail": .string(detail), "fix": fix.map { .string($0) } ?? .null])
    }
}

/// An error's message taken apart into what failed and what to do, as
/// `ErrorReport` words it for every other command: its hint where it sets one
/// apart, else the message's last sentence when it has more than one.
struct DoctorExplanation {
    let detail: String
    let fix: String?

    init(_ error: any Error) {
        let report = ErrorReport.from(error)
        if let hint = report.hint, !hint.isEmpty {
            detail = report.summary
            fix = hint
            return
        }
        let sentences = ErrorReport.splitting(report.exitCode, report.message, at: ". ")
        if let hint = sentences.hint, !hint.isEmpty {
            detail = sentences.summary + "."
            fix = hint
        } else {
            detail = report.message
            fix = nil
        }
    }
}

/// Every check's outcome, as doctor prints them.
struct DoctorReport {
    let checks: [DoctorCheck]

    var failed: [DoctorCheck] { checks.filter { $0.verdict == .fail } }
    var ok: Bool { failed.isEmpty }

    /// `12 checks: 9 pass, 1 warn, 1 fail, 1 skip`.
    var summary: String {
        let counts = DoctorVerdict.allCases.map { verdict in "\(checks.filter { $0.verdict == verdict }.count) \(verdict.rawValue)" }
        return "\(checks.count) checks: " + counts.joined(separator: ", ")
    }

    /// `{"ok": bool, "checks": [{"id", "title", "verdict", "detail", "fix"}]}`.
    var json: JSONValue {
        .object(["ok": .bool(ok), "checks": .array(checks.map(\.json))])
    }
}
