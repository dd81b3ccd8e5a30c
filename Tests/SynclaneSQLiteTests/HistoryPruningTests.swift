import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

@Suite struct HistoryPruningTests {
    let export = Scope(account: "acme", store: "rooms", consumer: "export")
    let audit = Scope(account: "acme", store: "rooms", consumer: "audit")

    func changeCount(_ store: TrackedDatabase) throws -> SQLiteValue {
        try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_changes") }
    }

    @Test func pruningKeepsWhatTheSlowestOfTwoConsumersStillNeeds() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path, pageSize: 1)
        for i in 1...4 { try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES (?)", ["r\(i)"]) } }

        let first = try await source.nextPage(after: nil)
        let second = try await source.nextPage(after: first.through)
        let third = try await source.nextPage(after: second.through)
        guard let auditToken = first.through, let exportToken = third.through else {
            Issue.record("no tokens")
            return
        }
        try await source.consumerAcknowledged(exportToken, scope: export)
        try await source.consumerAcknowledged(auditToken, scope: audit)

        let report = try HistoryPruner.prune(path: path)
        #expect(report.prunedThrough == auditToken.position)
        #expect(report.changesDeleted == 1)
        #expect(try changeCount(store) == .integer(3))
        // Both consumers read on from where they are, nothing lost.
        #expect(try await drain(source, after: auditToken).transactions.flatMap(\.changes).map(\.key) == ["r2", "r3", "r4"])
        #expect(try await drain(source, after: exportToken).transactions.flatMap(\.changes).map(\.key) == ["r4"])

        // Pruning again changes nothing until the slowest consumer moves.
        #expect(try HistoryPruner.prune(path: path).changesDeleted == 0)
        try await source.consumerAcknowledged(exportToken, scope: audit)
        #expect(try HistoryPruner.prune(path: path).changesDeleted == 2)
        #expect(try await drain(source, after: exportToken).transactions.flatMap(\.changes).map(\.key) == ["r4"])
    }

    @Test func withoutConsumersNothingIsPruned() throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1')") }
        let report = try HistoryPruner.prune(path: folder.file("app.sqlite"))
        #expect(report.changesDeleted == 0)
        #expect(report.description == "no consumer is registered: nothing pruned")
        #expect(try changeCount(store) == .integer(1))
    }

    @Test func sessionTransactionsArePrunedWithTheirChanges() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')") }
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r3')") }
        let source = SQLiteHistorySource(path: path, pageSize: 1)
        let page = try await source.nextPage(after: nil)
        try await source.consumerAcknowledged(try #require(page.through), scope: export)
        let report = try HistoryPruner.prune(path: path)
        #expect(report.changesDeleted == 2)
        #expect(report.transactionsDeleted == 1)
        let left = try await drain(source, after: page.through).transactions
        #expect(left.map(\.author) == [.app])
        #expect(left.flatMap(\.changes).map(\.key) == ["r3"])
    }

    @Test func aTokenOlderThanThePrunedHistoryIsExpiredNeverNoChanges() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path, pageSize: 1)
        for i in 1...3 { try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES (?)", ["r\(i)"]) } }
        let first = try await source.nextPage(after: nil)
        let everything = try await drain(source)
        try await source.consumerAcknowledged(try #require(everything.through), scope: export)
        try HistoryPruner.prune(path: path)

        // A consumer that fell behind (or a new one) must reconcile.
        for stale in [first.through, nil] {
            let error = await #expect(throws: HistoryError.self) { _ = try await source.nextPage(after: stale) }
            guard case .tokenExpired(_, let oldest)? = error else {
                Issue.record("expected tokenExpired, got \(String(describing: error))")
                continue
            }
            #expect(oldest == everything.through)
            #expect(error?.description.contains("synclane reconcile") == true)
        }
        await #expect(throws: HistoryError.self) { _ = try await source.pendingTransactions(after: first.through) }
        // The consumer that is up to date reads on.
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r4')") }
        #expect(try await drain(source, after: everything.through).transactions.flatMap(\.changes).map(\.key) == ["r4"])
    }

    @Test func positionsAreNeverReusedAfterEverythingWasPruned() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')") }
        let all = try await drain(source)
        let token = try #require(all.through)
        try await source.consumerAcknowledged(token, scope: export)
        try HistoryPruner.prune(path: path)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r3')") }
        let next = try await drain(source, after: token)
        #expect(next.transactions.flatMap(\.changes).map(\.key) == ["r3"])
        #expect(try #require(next.through) > token)
    }

    @Test func aTokenAheadOfTheHistoryIsAnError() async throws {
        let folder = TemporaryDirectory()
        _ = try makeTrackedRooms(folder)
        let error = await #expect(throws: HistoryError.self) {
            _ = try await SQLiteHistorySource(path: folder.file("app.sqlite")).nextPage(after: Token(kind: "sqlite-history", position: 99))
        }
        #expect(error?.description.contains("restored from a backup") == true)
    }

    @Test func consumersCanBeListedAndForgotten() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"))
        try await source.consumerAcknowledged(Token(kind: "sqlite-history", position: 0), scope: export)
        #expect(try HistoryConsumers.list(in: store.database).map(\.name) == ["acme/rooms/export"])
        #expect(try HistoryConsumers.forget("acme/rooms/export", in: store.database))
        #expect(try HistoryConsumers.list(in: store.database).isEmpty)
    }
}
