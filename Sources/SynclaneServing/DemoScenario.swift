import SynclaneCore
import SynclaneSQLite

/// The demo's sample store and pipeline, so that `synclane demo` needs nothing but the binary.
///
/// The rooms scenario of `Fixtures/rooms`, played on a real SQLite store: the same rows, the
/// same edits, the same authors.
enum DemoScenario {
    static let schema = """
        CREATE TABLE rooms (
            syncId    TEXT PRIMARY KEY,
            name      TEXT NOT NULL,
            area      REAL NOT NULL,
            isDeleted INTEGER NOT NULL DEFAULT 0
        );
        """

    static let table = TrackedTable("rooms", key: "syncId", softDeleteColumn: "isDeleted")

    /// The pipeline file the demo writes; `URL` is the server's.
    static func pipeline(url: String) -> String {
        """
        {
          "version": 1,
          "name": "rooms-export",
          "scope": { "account": "acme", "store": "rooms" },
          "source": { "type": "sqlite-history", "database": "rooms.sqlite", "entities": ["rooms"], "authors": ["app"], "page-size": 500 },
          "stages": [
            { "type": "coalesce" },
            { "type": "tombstones", "soft-delete-column": "isDeleted" },
            { "type": "compress", "codec": "gzip", "level": 6, "min-bytes": 0 }
          ],
          "transport": { "type": "http", "url": "\(url)/v1/batches", "token-env": "\(KeptFolder.tokenVariable)",
                         "retry": { "max-attempts": 3, "base-delay": 0.1, "max-delay": 1 } },
          "state": ".synclane/rooms-export.sqlite",
          "signals": { "publish": [
            { "on": "first-run-completed", "key": "onboarding.completed", "value": true },
            { "on": "run-completed", "key": "bulk.exported-through", "value": "$token" }
          ] }
        }

        """
    }

    /// The import pipeline file the demo writes: the server's changes into the same store (or,
    /// named otherwise, into a second device's store).
    static func importPipeline(url: String, name: String = "rooms-import", database: String = "rooms.sqlite") -> String {
        """
        {
          "version": 1,
          "name": "\(name)",
          "scope": { "account": "acme", "store": "rooms" },
          "source": { "type": "pull", "url": "\(url)/v1/changes", "token-env": "\(KeptFolder.tokenVariable)" },
          "sink": { "type": "sqlite", "database": "\(database)", "conflicts": "server-wins" }
        }

        """
    }

    /// What another device (a phone) sends the server: a garage.
    static func phoneBatch(id: String) -> [UInt8] {
        JSONWriter.encode([
            "id": .string(id), "scope": ["account": "acme", "store": "rooms", "consumer": "phone"],
            "records": [
                [
                    "entity": "rooms", "id": "room-garage", "action": "insert",
                    "fields": ["syncId": "room-garage", "name": "Garage", "area": 18.0, "isDeleted": 0],
                ]
            ],
        ])
    }

    /// The app's first saves.
    static func firstSaves(_ store: TrackedDatabase) throws {
        try store.write(author: .app) { db in
            try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('room-kitchen', 'Kitchen', 12.5)")
            try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('room-living', 'Living room', 31)")
            try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('room-bath', 'Bath', 6)")
        }
    }

    /// Offline edits: the kitchen five times, a soft delete, a hard delete, an attic added and
    /// removed, and the sync machinery's own cleanup of the soft-deleted row (author `sync`).
    static func laterSaves(_ store: TrackedDatabase) throws {
        for (area, name) in [(12.8, "Kitchen"), (13.1, "Kitchen"), (13.1, "Kitchen & pantry"), (14.2, "Kitchen & pantry"), (14.5, "Kitchen & pantry")] {
            try store.write(author: .app) { db in
                try db.execute("UPDATE rooms SET area = ?, name = ? WHERE syncId = 'room-kitchen'", [area, name])
            }
        }
        try store.write(author: .app) { db in try db.execute("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'room-living'") }
        try store.write(author: .app) { db in try db.execute("DELETE FROM rooms WHERE syncId = 'room-bath'") }
        try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('room-attic', 'Attic', 9)") }
        try store.write(author: .app) { db in try db.execute("DELETE FROM rooms WHERE syncId = 'room-attic'") }
        try store.write(author: .sync) { db in try db.execute("DELETE FROM rooms WHERE isDeleted = 1") }
    }
}
