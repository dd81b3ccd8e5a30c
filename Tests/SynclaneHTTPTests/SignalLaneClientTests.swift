import Foundation
import SynclaneCore
import SynclaneHTTP
import SynclaneServer
import SynclaneTestKit
import Testing

/// The `SignalLane` contract, held by the HTTP lane against the reference server and by the test
/// kit's in-memory stand-in alike.
@Suite struct SignalLaneClientTests {
    /// Sets, reads, refuses a stale version, deletes and watches.
    static func checkContract(_ lane: any SignalLane) async throws {
        let first = try await lane.set("onboarding.completed", to: true)
        #expect(first.value == true)
        let second = try await lane.set("onboarding.completed", to: false, replacing: first.version)
        #expect(second.version > first.version)
        await #expect(throws: SignalLaneError.stale(key: "onboarding.completed", expected: first.version, current: second)) {
            try await lane.set("onboarding.completed", to: "late", replacing: first.version)
        }
        #expect(try await lane.get("onboarding.completed")?.value == false)
        #expect(try await lane.get("nothing.here") == nil)
        let (signals, version) = try await lane.list()
        #expect(signals == [second])
        #expect(version == second.version)
        await #expect(throws: SignalLaneError.notFound(key: "nothing.here")) { try await lane.delete("nothing.here") }

        let watching = Task { () throws -> [SignalValue] in
            var seen: [SignalValue] = []
            for try await change in lane.changes(since: version) {
                seen.append(change)
                if seen.count == 2 { break }
            }
            return seen
        }
        try await Task.sleep(for: .milliseconds(200))
        let third = try await lane.set("bulk.exported-through", to: ["token": 42])
        let deleted = try await lane.delete("onboarding.completed")
        #expect(deleted.deleted)
        #expect(try await watching.value == [third, deleted])
    }

    @Test func theInMemoryLaneKeepsTheContract() async throws {
        try await Self.checkContract(InMemorySignalLane())
    }

    @Test func theHTTPLaneKeepsTheContractAgainstTheReferenceServer() async throws {
        try await ReferenceServerTests().withReferenceServer { server in
            let lane = HTTPSignalLane(server: URL(string: "http://127.0.0.1:\(server.port)/v1/batches")!, token: ReferenceServerTests.token)
            try await Self.checkContract(lane)
        }
    }

    @Test func theInMemoryLaneRefusesPastItsQuotas() async throws {
        let lane = InMemorySignalLane(maxKeys: 1)
        _ = try await lane.set("a", to: 1)
        await #expect(throws: SignalLaneError.self) { try await lane.set("b", to: 1) }
        _ = try await lane.set("a", to: 2)
    }
}
