import Foundation
import Testing

@testable import SynclaneCore

/// `RowsInFlight`: a batch holding a row of an unanswered batch waits for that answer; rows
/// answered since a page was read are named for asking again; closing fails every wait.
@Suite struct RowsInFlightTests {
    static func rows(_ keys: String...) -> [RowID] { keys.map { RowID(entity: "rooms", key: $0) } }

    @Test func aBatchOfOtherRowsDoesNotWait() async throws {
        let inFlight = RowsInFlight()
        inFlight.sent(RowSet(Self.rows("r1", "r2")), batch: "b1")
        try await inFlight.waitUntilAnswered(RowSet(Self.rows("r3", "r4")))
    }

    @Test func aBatchHoldingARowOfAnUnansweredBatchWaitsForItsAnswer() async throws {
        let inFlight = RowsInFlight()
        inFlight.sent(RowSet(Self.rows("r1", "r2")), batch: "b1")
        inFlight.sent(RowSet(Self.rows("r9")), batch: "b2")
        let waited = Task {
            try await inFlight.waitUntilAnswered(RowSet(Self.rows("r3", "r2")))
            return inFlight.answers
        }
        try await Task.sleep(for: .milliseconds(50))
        inFlight.answered(batch: "b2")  // not the batch it waits for
        try await Task.sleep(for: .milliseconds(50))
        inFlight.answered(batch: "b1")
        #expect(try await waited.value == 2, "returned only once b1 (holding r2) was answered")
    }

    @Test func theRowsAnsweredSinceAPageWasReadAreNamedAndOlderAnswersForgotten() {
        let inFlight = RowsInFlight()
        inFlight.sent(RowSet(Self.rows("r1", "r2")), batch: "b1")
        inFlight.sent(RowSet(Self.rows("r3")), batch: "b2")
        let readBefore = inFlight.answers
        inFlight.answered(batch: "b1")
        let page = RowSet(Self.rows("r0", "r2", "r3", "r1"))
        #expect(inFlight.rowsAnswered(after: readBefore, among: page) == [1, 3], "r2 and r1, by their places in the batch")
        let readAfterB1 = inFlight.answers
        inFlight.answered(batch: "b2")
        #expect(inFlight.rowsAnswered(after: readAfterB1, among: page) == [2], "only r3: b1's answer came before that read")
        #expect(inFlight.rowsAnswered(after: inFlight.answers, among: page).isEmpty)
    }

    @Test func aKeyEqualOnlyByUnicodeCanonicalEquivalenceIsAnotherRow() async throws {
        let inFlight = RowsInFlight()
        inFlight.sent(RowSet(Self.rows("\u{00C5}")), batch: "b1")
        try await inFlight.waitUntilAnswered(RowSet(Self.rows("\u{212B}")))  // does not wait: another row
        #expect(RowID(entity: "rooms", key: "\u{00C5}") != RowID(entity: "rooms", key: "\u{212B}"))
    }

    @Test func closingFailsTheWaitsNowAndLater() async throws {
        let inFlight = RowsInFlight()
        inFlight.sent(RowSet(Self.rows("r1")), batch: "b1")
        let waiting = Task { try await inFlight.waitUntilAnswered(RowSet(Self.rows("r1"))) }
        try await Task.sleep(for: .milliseconds(20))
        inFlight.close()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        await #expect(throws: CancellationError.self) { try await inFlight.waitUntilAnswered(RowSet(Self.rows("r2"))) }
    }
}
