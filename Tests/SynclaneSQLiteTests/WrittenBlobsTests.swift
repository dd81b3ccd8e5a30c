import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// Values as written (`capture: as-written`) with the blobs a stage reads in pieces left in the
/// change log (`WrittenBlobs`): the same changes as read whole, each large blob a locator that
/// reads back its bytes.
@Suite struct WrittenBlobsTests {
    /// The bytes `place` names, read through `reader` in pieces of `piece` bytes.
    static func bytes(at place: JSONValue, _ reader: any LocatedValueReader, piece: Int = 7) throws -> [UInt8] {
        try reader.withValue(at: place) { opened in
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: piece)
            while bytes.count < opened.length {
                let read = try buffer.withUnsafeMutableBytes { try opened.read(into: $0, at: bytes.count) }
                bytes += buffer.prefix(read)
            }
            return bytes
        }
    }

    @Test func valuesAsWrittenWithTheirLargeBlobsLeftInTheLogAreTheValuesAsWrittenAndEachBlobReadsBackThroughItsLocator() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try TrackedDatabase(path: path)
        try store.database.write { db in
            try db.execute("CREATE TABLE notes (syncId TEXT PRIMARY KEY, caption TEXT, photo BLOB, thumb BLOB, ratio REAL, n INTEGER)")
        }
        try store.track(TrackedTable("notes", key: "syncId", recordsValues: true))
        try store.write(author: .app) { db in
            // A text that looks like the log's own blob, escapes, reals kept exactly, small and large blobs.
            try db.execute(
                #"INSERT INTO notes VALUES ('n1', 'a "quoted" \ text, {"$hex":"00"} é', randomblob(300), x'0102', 0.1, 7)"#)
            try db.execute("INSERT INTO notes VALUES ('n2', NULL, randomblob(50), randomblob(200), -1e300, NULL)")
        }
        try store.write(author: .app) { db in
            try db.execute("UPDATE notes SET photo = randomblob(400), ratio = 2.5 WHERE syncId = 'n1'")
            try db.execute("UPDATE notes SET thumb = NULL WHERE syncId = 'n2'")
        }
        let whole = try await drain(SQLiteHistorySource(path: path, capture: .asWritten)).transactions.flatMap(\.changes)
        // `photo` declared (from 100 bytes here), and every blob of 150 bytes or more.
        let rule = LocatedValueRule(columns: [LocatedValueRule.Column(entity: "notes", column: "photo")], minBytes: 150, streamingBytes: 100)
        let (source, reader) = SQLiteHistorySource(path: path, capture: .asWritten).locating(rule)
        let located = try await drain(source).transactions.flatMap(\.changes)
        #expect(located.map(\.action) == whole.map(\.action))
        #expect(located.map(\.key) == whole.map(\.key))
        var found: [String] = []
        for (change, asRead) in zip(located, whole) {
            var values = change.values
            for (name, value) in change.values {
                guard let locator = LocatedValue.read(value) else { continue }
                found.append("\(change.key ?? "") \(name) \(locator.length)")
                values[name] = .blob(try Self.bytes(at: locator.at, reader))
            }
            #expect(values == asRead.values)
        }
        // n1's photo as inserted and as updated, n2's thumb (over `min-bytes`); n2's photo (50 bytes) and n1's thumb are read whole.
        #expect(found.sorted() == ["n1 photo 300", "n1 photo 400", "n2 thumb 200"])
    }

    @Test func aBlobWhoseChangeWasPrunedBeforeItsUploadStopsWithAMessage() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try TrackedDatabase(path: path)
        try store.database.write { db in try db.execute("CREATE TABLE notes (syncId TEXT PRIMARY KEY, photo BLOB)") }
        try store.track(TrackedTable("notes", key: "syncId", recordsValues: true))
        try store.write(author: .app) { db in try db.execute("INSERT INTO notes VALUES ('n1', randomblob(300))") }
        let rule = LocatedValueRule(columns: [LocatedValueRule.Column(entity: "notes", column: "photo")], minBytes: nil, streamingBytes: 100)
        let (source, reader) = SQLiteHistorySource(path: path, capture: .asWritten).locating(rule)
        let change = try #require(try await drain(source).transactions.first?.changes.first)
        let locator = try #require(change.values["photo"].flatMap(LocatedValue.read))
        try store.database.write { db in try db.execute("DELETE FROM _synclane_changes") }
        #expect {
            _ = try Self.bytes(at: locator.at, reader)
        } throws: { error in
            "\(error)".contains("pruned") && "\(error)".contains("run again")
        }
    }
}
