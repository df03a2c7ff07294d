@testable import DevtrustPosture
import DevtrustTestSupport
import Foundation
import Testing

/// The administrator's collector (a program): its claims are measured ones, which a claim given by
/// hand (the configuration's, `--claim`, a client of the agent) cannot replace. When it fails, the
/// names it produced before are still named, left out, so that nobody fills them in meanwhile.
@Suite struct AdminCollectorTests {
    final class MemoryCache: PostureCacheStore, @unchecked Sendable {
        var bytes: [UInt8]?
        func read() -> [UInt8]? { bytes }
        func write(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    @Test func aFailingCollectorStillNamesWhatItMeasuredBefore() throws {
        let directory = TemporaryDirectory("collector")
        let program = directory.write("collector", "#!/bin/sh\nif [ -e \(directory.file("broken")) ]; then exit 3; fi\necho '{\"siteCompliance\": \"ok\"}'\n", mode: 0o755)
        var settings = PostureSettings(collector: [program])
        settings.cacheSeconds = 0
        let cache = MemoryCache()
        let input = PostureInput(effectiveUserID: 65534, home: nil, keyProtection: "software")
        let working = PostureCollector.collect(input, settings: settings, cache: cache, now: 1)
        #expect(working.attributes.contains(Attribute(name: "siteCompliance", value: "ok", source: "printed by \(program)")), "\(working.attributes)")
        _ = directory.write("broken", "")
        for now in [2, 3] as [Int64] {
            let failing = PostureCollector.collect(input, settings: settings, cache: cache, now: now)
            let left = try #require(failing.attributes.first { $0.name == "siteCompliance" }, "\(failing.attributes)")
            #expect(left.value == nil && left.source.contains("the administrator's collector failed this time (posture collector \(program) exited with 3"), "\(left)")
            #expect(failing.problems.contains { $0.contains("exited with 3") })
        }
    }
}
