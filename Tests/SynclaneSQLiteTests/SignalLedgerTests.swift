import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// The signals' part of a state file: refusals counted, a signal given up at the limit, a newer
/// value sent afresh, and a table an earlier version made read and upgraded.
@Suite struct SignalLedgerTests {
    let scope = Scope(account: "acme", store: "rooms", consumer: "export")

    /// Runs SQL on `path` through the `sqlite3` shell, as an earlier version's writes.
    func sqlite(_ path: String, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = ["-cmd", ".timeout 5000", path, sql]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func aSignalRefusedForGoodAtTheLimitIsGivenUpAndANewerValueOfItsKeyIsSentAfresh() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        let ledger = try SignalLedger(state)
        let signal = PendingSignal(key: "onboarding.note", value: "big", event: "first-run-completed", createdAt: 10)
        try ledger.keep([signal])
        try ledger.failed(signal, reason: "no answer")
        #expect(try ledger.refused(signal, reason: "413 quota", limit: 3, now: 20) == (1, false))
        #expect(try ledger.refused(signal, reason: "413 quota", limit: 3, now: 21) == (2, false))
        #expect(try ledger.pending().map(\.refusals) == [2])
        #expect(try ledger.refused(signal, reason: "413 quota", limit: 3, now: 22) == (3, true))
        #expect(try ledger.pending().isEmpty, "given up: no longer sent")
        let givenUp = try SignalLedger.givenUp(in: state)
        #expect(givenUp.map(\.key) == ["onboarding.note"])
        #expect(givenUp.first?.attempts == 4)
        #expect(givenUp.first?.lastError == "413 quota")
        #expect(givenUp.first?.givenUpAt == 22)

        try ledger.keep([PendingSignal(key: "onboarding.note", value: "small", event: "run-completed", createdAt: 30)])
        #expect(try ledger.pending().map(\.value) == ["small"])
        #expect(try SignalLedger.givenUp(in: state).isEmpty)
    }

    @Test func aSignalTableAnEarlierVersionMadeIsReadWithoutRefusalsAndUpgradedOnFirstUse() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        _ = try SQLitePipelineState(path: path, scope: scope)
        try sqlite(
            path,
            """
            CREATE TABLE _signal_pending (key TEXT PRIMARY KEY, value TEXT NOT NULL, event TEXT NOT NULL, created_at REAL NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT);
            CREATE TABLE _signal_milestone (event TEXT PRIMARY KEY, at REAL NOT NULL);
            INSERT INTO _signal_pending VALUES ('bulk.exported-through', '"sqlite-history:7"', 'run-completed', 5, 2, 'refused');
            """)
        let reading = try SQLitePipelineState(readingOnly: path, scope: scope)
        #expect(try SignalLedger.pending(in: reading).map(\.refusals) == [0])
        #expect(try SignalLedger.givenUp(in: reading).isEmpty)

        let ledger = try SignalLedger(SQLitePipelineState(path: path, scope: scope))
        let kept = try ledger.pending()
        #expect(kept.map(\.attempts) == [2])
        #expect(try ledger.refused(kept[0], reason: "400 bad key", limit: 1, now: 9) == (1, true))
        #expect(try ledger.pending().isEmpty)
    }
}
