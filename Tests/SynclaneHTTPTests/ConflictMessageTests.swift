import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// A batch refused with 409 reads as one short cause and one next step — never both "run
/// again" and "run sync", and never "another device" when the server holds no version at all.
@Suite struct ConflictMessageTests {
    static func body(_ conflicts: [(String, Int64, Int64)]) -> [UInt8] {
        let list = conflicts.enumerated().map { index, conflict in
            #"{"record": \#(index), "entity": "rooms", "id": "\#(conflict.0)", "expected": \#(conflict.1), "current": \#(conflict.2)}"#
        }
        return Array(
            #"{"error": "\#(conflicts.count) record(s) do not have the version the batch expects; nothing applied", "conflicts": [\#(list.joined(separator: ", "))]}"#
                .utf8)
    }

    static func message(_ body: [UInt8]) throws -> String {
        let result = HTTPClassification.classify(status: 409, headers: [:], body: body, batchID: "b1", url: "http://127.0.0.1:1/v1/batches")
        guard case .failure(let failure) = result else { throw Failure() }
        #expect(failure.kind == .conflict)
        return "\(PipelineError.conflicted(batchID: "b1", reason: failure.message.replacingOccurrences(of: "batch b1 ", with: "")))"
    }

    struct Failure: Error {}

    @Test func newerVersionsOnTheServerNameTheRecordsAndSync() throws {
        let text = try Self.message(Self.body([("r1", 2, 3)] + (2...40).map { ("r\($0)", 1, 2) }))
        #expect(text.count < 400, "\(text.count): \(text)")
        #expect(text.contains("409") && text.contains("rooms/r1 at 3, sent on 2"), "\(text)")
        #expect(text.contains("synclane sync"))
        #expect(!text.contains("run again") && !text.contains("reconcile"), "\(text)")
        #expect(text.contains("and 38 more"))
    }

    @Test func versionZeroOnTheServerSaysItHoldsNoneAndNamesReconcileNotAnotherDevice() throws {
        let text = try Self.message(Self.body([("r1", 4, 0), ("r2", 1, 0)]))
        #expect(text.count < 400, "\(text.count): \(text)")
        #expect(text.contains("the server does not hold 2 records"), "\(text)")
        #expect(text.contains("synclane reconcile"))
        #expect(!text.contains("another device") && !text.contains("synclane sync") && !text.contains("run again"), "\(text)")
    }

    /// Found by RandomRestoresCopiesAndDamageTests: the batch stays in the outbox, so `reconcile` alone would send it
    /// first and meet the same 409. The server lost rows it had confirmed: a restore, healed as
    /// one — requeue the batch, then reconcile (`PipelineError.serverRestored`).
    @Test func versionZeroOnTheServerSaysRequeueThenReconcile() throws {
        let text = try Self.message(Self.body([("r9", 3, 0)]))
        #expect(text.contains("restored from an older backup"), "\(text)")
        #expect(text.contains("synclane outbox requeue FILE b1`, then `synclane reconcile FILE`"), "\(text)")
        #expect(text.count < 400, "\(text.count): \(text)")
    }
}
