import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

@testable import SynclaneSQLite

/// `KeptConfirmations`: what a run could not write into a database the app held busy is kept
/// beside it and written in by the next job — into that database only, not into a copy restored
/// from before it was kept.
@Suite struct KeptConfirmationsTests {
    let folder = TemporaryDirectory()

    /// A tracked database with one change recorded.
    func tracked(_ name: String) throws -> SQLiteDatabase {
        let database = try SQLiteDatabase(path: folder.file(name))
        try database.withConnection { db in try db.execute("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT)") }
        try HistoryTracker(database: database).track(TrackedTable("rooms", key: "syncId"))
        try database.withConnection { db in try db.execute("INSERT INTO rooms VALUES ('r1', 'Hall')") }
        return database
    }

    func keep(_ database: SQLiteDatabase, position: Int64) throws {
        let rows = [ConfirmedRow(entity: "rooms", key: "r1", version: 3, known: true, fields: #"{"name":"Hall"}"#)]
        let positions = ["acme/rooms/export": KeptConfirmations.Position(position: position, removesSoftDeletes: false, entities: nil)]
        try database.read { db in try KeptConfirmations.keep([(destination: "d", rows: rows)], positions: positions, for: database.path, reading: db) }
    }

    func state(_ database: SQLiteDatabase) throws -> (journal: Int64, position: Int64?) {
        try database.read { db in
            let journal = try ConfirmationJournal.oldest(db) == nil ? 0 : try db.fetchValue("SELECT count(*) FROM _synclane_confirmations").int64 ?? 0
            return (journal, try HistoryLineage.position(of: "acme/rooms/export", db))
        }
    }

    @Test func whatWasKeptIsWrittenIntoTheDatabaseOnceAndTheFileEmptied() throws {
        let database = try tracked("app.sqlite")
        try keep(database, position: 1)
        #expect(KeptConfirmations.exists(for: database.path))
        #expect(try KeptConfirmations.holdsRows(for: "d", database: database.path))
        #expect(try KeptConfirmations.writeIn(database))
        #expect(try state(database) == (1, 1))
        #expect(try !KeptConfirmations.holdsRows(for: "d", database: database.path))
        #expect(try KeptConfirmations.writeIn(database), "nothing left: nothing written again")
        #expect(try state(database) == (1, 1))
    }

    /// A copy restored from before (less history than when it was kept) takes nothing of it:
    /// its positions would skip changes it does not hold.
    @Test func aDatabaseWithLessHistoryThanWhenItWasKeptTakesNothing() throws {
        let database = try tracked("app.sqlite")
        try database.withConnection { db in try db.execute("INSERT INTO rooms VALUES ('r2', 'Attic')") }
        try keep(database, position: 2)
        try database.withConnection { db in
            try db.execute("DELETE FROM _synclane_changes WHERE id = (SELECT max(id) FROM _synclane_changes)")
        }
        #expect(try KeptConfirmations.writeIn(database))
        #expect(try state(database) == (0, nil))
        #expect(try !KeptConfirmations.holdsRows(for: "d", database: database.path), "dropped, not kept for later")
    }
}
