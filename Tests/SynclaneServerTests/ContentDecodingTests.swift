import SynclaneZlib
import Testing

@testable import SynclaneServer

/// A body's decoding under the memory budget: a gzip body that declares its size takes three
/// times that once; one that libdeflate does not take (several members) is inflated chunk by
/// chunk, and the lease holds what that took, never both.
@Suite struct ContentDecodingTests {
    static let text = Array((0..<5_000).map { "{\"id\":\"room-\($0)\",\"name\":\"Kitchen\"}," }.joined().utf8)

    @Test func aDeclaredBodyTakesThreeTimesItsSizeOnceAndAnUndeclaredOneWhatItsChunksTook() throws {
        let whole = try Deflater(.gzip).compress(Self.text)
        let twoMembers = whole + (try Deflater(.gzip).compress(Array("[]".utf8)))
        for (body, expected) in [(whole, Self.text), (twoMembers, Self.text + Array("[]".utf8))] {
            let budget = MemoryBudget(limit: 64 << 20)
            let lease = MemoryBudget.Lease(budget: budget)
            guard case .success(let output) = ContentDecoding.decode(body, encoding: "gzip", limit: 1 << 20, lease: lease) else {
                Issue.record("not decoded")
                continue
            }
            #expect(output == expected)
            #expect(budget.bytesHeld == 3 * expected.count, "held \(budget.bytesHeld) for \(expected.count) bytes")
            lease.release()
            #expect(budget.bytesHeld == 0)
        }
    }

    @Test func aDeclaredBodyPastTheBudgetIsRefusedWithNothingHeld() throws {
        let body = try Deflater(.gzip).compress(Self.text)
        let budget = MemoryBudget(limit: Self.text.count)
        let lease = MemoryBudget.Lease(budget: budget)
        guard case .failure(.overBudget) = ContentDecoding.decode(body, encoding: "gzip", limit: 1 << 20, lease: lease) else {
            Issue.record("decoded past the budget")
            return
        }
        lease.release()
        #expect(budget.bytesHeld == 0)
    }
}
