/// The audit of what the agent's loop decides on its own: connections refused or dropped, requests
/// it could not read. A user who opens connections in a loop would otherwise write a line for each
/// to stderr (journald): per uid, the first such line of an interval is said, the rest of the
/// interval only counted, and said in one line when it ends (or when the agent stops), as the
/// service does for the rate limit's refusals.
struct AgentConnectionAudit {
    let interval: Int64
    /// The kinds of outcome one line counts separately; the rest are counted together.
    static let kindsPerLine = 8
    private var tallies = [UInt32: Tally]()

    private struct Tally {
        /// When the uid's last line was said.
        var saidAt: Int64
        /// The last peer of the uid counted (its pid goes in the line).
        var peer: AgentPeer
        /// Outcomes counted since, in their first order.
        var counts: [(outcome: String, count: Int)] = []
        var others = 0

        var total: Int { counts.reduce(others) { $0 + $1.count } }
    }

    init(interval: Int64) {
        self.interval = interval
    }

    /// The lines to say now for `record`: itself, when its uid said none within the interval (and
    /// then what was counted before it); none, when it is counted instead.
    mutating func record(_ record: AgentAuditRecord, now: Int64) -> [AgentAuditRecord] {
        let uid = record.peer.uid
        guard var tally = tallies[uid], now - tally.saidAt < interval else {
            let before = tallies[uid].flatMap(Self.summary)
            tallies[uid] = Tally(saidAt: now, peer: record.peer)
            return (before.map { [$0] } ?? []) + [record]
        }
        tally.peer = record.peer
        if let index = tally.counts.firstIndex(where: { $0.outcome == record.outcome }) {
            tally.counts[index].count += 1
        } else if tally.counts.count < Self.kindsPerLine {
            tally.counts.append((record.outcome, 1))
        } else {
            tally.others += 1
        }
        tallies[uid] = tally
        return []
    }

    /// The counts whose interval has ended, as lines; uids quiet for an interval are forgotten.
    mutating func due(now: Int64) -> [AgentAuditRecord] {
        var lines = [AgentAuditRecord]()
        for (uid, tally) in tallies where now - tally.saidAt >= interval {
            if let line = Self.summary(tally) {
                lines.append(line)
                tallies[uid] = Tally(saidAt: now, peer: tally.peer)
            } else {
                tallies[uid] = nil
            }
        }
        return lines
    }

    /// When the next count is due, if any is waiting.
    var nextDue: Int64? {
        tallies.values.filter { $0.total > 0 }.map { $0.saidAt + interval }.min()
    }

    /// Every count not said yet (the agent stops).
    mutating func all() -> [AgentAuditRecord] {
        defer { tallies = [:] }
        return tallies.values.compactMap(Self.summary)
    }

    /// `outcome="41 more since the last line: 40 dropped: no whole request within 5000 ms; 1 refused: ..."`
    private static func summary(_ tally: Tally) -> AgentAuditRecord? {
        let total = tally.total
        guard total > 0 else { return nil }
        var parts = tally.counts.map { "\($0.count) \($0.outcome)" }
        if tally.others > 0 { parts.append("\(tally.others) of other kinds") }
        return AgentAuditRecord(peer: tally.peer, operation: nil, outcome: "\(total) more since the last line: " + parts.joined(separator: "; "))
    }
}
