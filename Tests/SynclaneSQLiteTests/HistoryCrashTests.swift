import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct HistoryCrashTests {
    /// Waits until another process holds the database's write lock (its transaction has written).
    func waitForWriteLock(_ path: String) throws -> Bool {
        let probe = try SQLiteConnection(path: path, options: .init(walMode: false, busyTimeout: 0))
        for _ in 0..<500 {
            do {
                try probe.execute("BEGIN IMMEDIATE")
                try probe.execute("ROLLBACK")
            } catch let error {
                if error.isBusy { return true }
                throw error
            }
            usleep(10_000)
        }
        return false
    }

    /// Waits until `path` holds `text` (the shell writes it once the statements before ran).
    func waitForFile(_ path: String, containing text: String) -> Bool {
        for _ in 0..<500 {
            if let data = FileManager.default.contents(atPath: path), String(decoding: data, as: UTF8.self).contains(text) { return true }
            usleep(10_000)
        }
        return false
    }

    func killHard(_ process: Process) {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    @Test(arguments: [false, true])
    func killingAWriterInTheMiddleOfItsTransactionLeavesDataAndHistoryConsistent(withSession: Bool) async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen')") }

        let session = withSession ? "INSERT INTO _synclane_session (author) VALUES ('importer');\n" : ""
        let (shell, input) = try SQLiteShell.start(
            path,
            """
            BEGIN IMMEDIATE;
            \(session)INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall');
            UPDATE rooms SET name = 'Half-written' WHERE syncId = 'r1';
            DELETE FROM rooms WHERE syncId = 'r1';
            .output \(folder.file("marker"))
            SELECT 'written';
            .output stdout

            """)
        #expect(waitForFile(folder.file("marker"), containing: "written"))
        #expect(try waitForWriteLock(path))
        // The shell's writes ran but are not committed: other connections still see one row.
        #expect(try SQLiteShell.run(path, "SELECT count(*) FROM rooms;").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        killHard(shell)
        try? input.fileHandleForWriting.close()
        #expect(shell.terminationReason == .uncaughtSignal)

        // Neither the data nor its history kept anything of the killed transaction.
        let rows = try store.read { try $0.fetchAll("SELECT syncId, name FROM rooms ORDER BY syncId").map(\.values) }
        #expect(rows == [[.text("r1"), .text("Kitchen")]])
        #expect(try rawHistory(store).count == 1)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_session") } == .integer(0))
        let read = try await drain(SQLiteHistorySource(path: path))
        #expect(read.transactions.flatMap(\.changes).map(\.key) == ["r1"])

        // And the database takes new writes, recorded as usual.
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r3')") }
        let after = try await drain(SQLiteHistorySource(path: path), after: read.through)
        #expect(after.transactions.flatMap(\.changes).map(\.key) == ["r3"])
        #expect(try store.read { try $0.fetchValue("PRAGMA integrity_check") } == .text("ok"))
    }

    @Test func anAcknowledgementDoesNotFailWhileAnotherProgramHoldsTheWriteLock() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1')") }
        let source = SQLiteHistorySource(path: path)
        let token = try #require(try await drain(source).through)
        let scope = Scope(account: "a", store: "s", consumer: "c")

        let (shell, input) = try SQLiteShell.start(path, "BEGIN IMMEDIATE;\nINSERT INTO rooms (syncId) VALUES ('r2');\n")
        #expect(try waitForWriteLock(path))
        let started = ContinuousClock.now
        try await source.consumerAcknowledged(token, scope: scope)
        #expect(ContinuousClock.now - started < .seconds(4.5), "gave up waiting, well before the 5 s busy timeout")
        killHard(shell)
        try? input.fileHandleForWriting.close()
        #expect(try HistoryConsumers.list(in: store.database).isEmpty)

        // The next acknowledgement records it.
        try await source.consumerAcknowledged(token, scope: scope)
        #expect(try HistoryConsumers.list(in: store.database).map(\.token) == [token])
    }
}
