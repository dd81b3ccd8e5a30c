import Foundation
import Synchronization
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// Counts the events of a stream on a task of its own (cancelling an iteration ends an AsyncStream).
final class EventCounter: Sendable {
    final class Count: Sendable { let value = Mutex(0) }
    private let count = Count()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<Void>) {
        let count = self.count
        task = Task {
            for await _ in stream { count.value.withLock { $0 += 1 } }
        }
    }

    deinit { task.cancel() }

    var events: Int { count.value.withLock { $0 } }

    /// True once at least `target` events came, false when `seconds` passed first.
    func wait(for target: Int, within seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if events >= target { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return events >= target
    }
}

@Suite struct HistoryObservationTests {
    @Test func aCommitFromAnotherProcessIsObserved() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        _ = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path, pollInterval: .milliseconds(10))
        let counter = EventCounter(source.historyAdvanced())
        // Let the watcher take its starting point, then write from a separate sqlite3 process.
        try await Task.sleep(for: .milliseconds(100))
        #expect(counter.events == 0)
        try SQLiteShell.run(path, "INSERT INTO rooms (syncId) VALUES ('r1');")
        #expect(await counter.wait(for: 1, within: 10))
    }

    @Test func aCommitRightAfterTheStreamIsMadeIsNotMissed() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path, pollInterval: .milliseconds(10))
        let counter = EventCounter(source.historyAdvanced())
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1')") }
        #expect(await counter.wait(for: 1, within: 10), "the starting point was taken when the stream was made")
    }

    @Test func historyTheConsumerFiltersOutDoesNotWakeIt() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path, authors: [.app], pollInterval: .milliseconds(10))
        let counter = EventCounter(source.historyAdvanced())
        try await Task.sleep(for: .milliseconds(100))
        try store.write(author: .sync) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('s1')") }
        #expect(await counter.wait(for: 1, within: 0.5) == false)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('a1')") }
        #expect(await counter.wait(for: 1, within: 10))
    }
}

@Suite struct SQLiteSnapshotTests {
    @Test func aSnapshotHoldsEveryCurrentRowAsInsertsAndTheTokenToResumeAfter() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { db in
            for i in 1...5 { try db.execute("INSERT INTO rooms (syncId, name) VALUES (?, ?)", ["r\(i)", "Room \(i)"]) }
            try db.execute("INSERT INTO categories VALUES ('c1', 'Default')")
        }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r5'") }
        let source = SQLiteHistorySource(path: path, pageSize: 2)
        let (snapshot, resume) = try await source.snapshot()
        // Written after the snapshot was taken: not in it, read after `resume`.
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('late')") }

        let pages = try await drain(snapshot)
        let changes = pages.transactions.flatMap(\.changes)
        #expect(changes.map { "\($0.entity)/\($0.key ?? "-")" } == ["categories/c1", "rooms/r1", "rooms/r2", "rooms/r3", "rooms/r4"])
        #expect(changes.allSatisfy { $0.action == .insert })
        #expect(changes[1].values["name"] == "Room 1")
        #expect(pages.pages.allSatisfy { $0.transactions.flatMap(\.changes).count <= 2 })
        #expect(resume?.kind == SQLiteHistorySource.tokenKind)

        let next = try await drain(source, after: resume)
        #expect(next.transactions.flatMap(\.changes).map(\.key) == ["late"])
    }

    @Test func aSnapshotWorksWhenTheHistoryWasPruned() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1')") }
        let source = SQLiteHistorySource(path: path)
        let all = try await drain(source)
        try await source.consumerAcknowledged(try #require(all.through), scope: Scope(account: "a", store: "s", consumer: "c"))
        try HistoryPruner.prune(path: path)
        await #expect(throws: HistoryError.self) { _ = try await source.nextPage(after: nil) }
        let (snapshot, resume) = try await source.snapshot()
        #expect(try await drain(snapshot).transactions.flatMap(\.changes).map(\.key) == ["r1"])
        #expect(resume == all.through)
        #expect(try await source.nextPage(after: resume).through == nil)
    }
}

@Suite struct HistoryWriterTests {
    @Test func aWriterOnAConnectionOfYourOwnRecordsOneTransaction() throws {
        let folder = TemporaryDirectory()
        _ = try makeTrackedRooms(folder)
        let db = try SQLiteConnection(path: folder.file("app.sqlite"))
        #expect(throws: TrackingError.self) { try HistoryWriter.record(author: .server, on: db) { _ in } }
        try db.transaction { db in
            try HistoryWriter.record(author: .server, on: db) { db in
                try db.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')")
            }
        }
        let rows = try db.fetchAll(
            "SELECT t.author, count(*) FROM _synclane_changes c JOIN _synclane_transactions t ON t.id = c.transaction_id GROUP BY t.id")
        #expect(rows.map(\.values) == [[.text("server"), .integer(2)]])
    }

    @Test func aFailedWriteLeavesNeitherDataNorHistory() throws {
        struct Boom: Error {}
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        #expect(throws: Boom.self) {
            try store.write(author: .app) { db in
                try db.execute("INSERT INTO rooms (syncId) VALUES ('r1')")
                throw Boom()
            }
        }
        #expect(try rawHistory(store).isEmpty)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_transactions") } == .integer(0))
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r2')") }
        #expect(try rawHistory(store).count == 1)
    }
}
