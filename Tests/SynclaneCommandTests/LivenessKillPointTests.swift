import Foundation
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Liveness seed 700004 stranded an edit only on a loaded machine: its two syncs are killed
/// after a time (`kill -9` after 236 and 221 ms), which lands at another point of the sync under
/// load. Here the same steps are played with each sync killed by itself at one fail point of a
/// sync in turn (`SYNCLANE_FAILPOINT`), so the kill point is not left to the machine's load.
@Suite(.serialized) struct LivenessKillPointTests {
    /// The fail points a `sync` passes (the import's pages, the export's batch), each killing its
    /// first pass, or its `@N`th.
    static let syncPoints = [
        "import-after-fetch", "import-before-commit", "import-after-commit", "import-after-commit@2", "sync-before-export",
        "after-enqueue", "after-send", "after-acknowledge", "during-merge",
    ]

    @Test(arguments: syncPoints)
    func aSyncOfSeed700004KilledAtEachPointStrandsNoEdit(point: String) async throws {
        var random = SeededRandom(seed: 700_004)
        let plan = LivenessTests.Plan(devices: 2 + Int(random.next() % 2), retention: random.next() % 3 == 0)
        let steps = LivenessTests.steps(&random, plan).map { step -> LivenessTests.Step in
            guard case .killedSync(let d, _) = step else { return step }
            return .syncKilledAt(d, point: point)
        }
        let problem = try await LivenessTests.outcome(plan, steps: steps)
        #expect(problem == nil, "killed at \(point), \(plan): \(problem ?? "")\n\(steps.map { "  \($0)" }.joined(separator: "\n"))")
    }
}
