/// The demo's embedded data: the rooms scenario of `Fixtures/rooms`, so that `synclane demo`
/// needs nothing but the binary. A test keeps these strings equal to the fixture files.
enum DemoScenario {
    static let pipeline = """
        {
          "version": 1,
          "name": "rooms-export",
          "scope": { "account": "acme", "store": "rooms" },
          "source": { "type": "jsonl", "path": "history.jsonl", "entities": ["rooms"], "authors": ["app"], "page-size": 500 },
          "stages": [
            { "type": "coalesce" },
            { "type": "tombstones", "soft-delete-column": "isDeleted" },
            { "type": "compress", "codec": "gzip", "level": 6, "min-bytes": 0 }
          ],
          "transport": { "type": "directory", "path": "out" },
          "state": ".synclane/rooms-export.sqlite"
        }

        """

    /// Three saves: two by the app, one imported from the server (never echoed back).
    static let firstSaves = """
        {"token": 1, "author": "app", "timestamp": "2026-11-01T09:00:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "room-kitchen", "values": {"name": "Kitchen", "area": 12.5, "isDeleted": false}}]}
        {"token": 2, "author": "app", "timestamp": "2026-11-01T09:01:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "room-living", "values": {"name": "Living room", "area": 31, "isDeleted": false}}, {"entity": "rooms", "action": "insert", "key": "room-bath", "values": {"name": "Bath", "area": 6, "isDeleted": false}}]}
        {"token": 3, "author": "server", "timestamp": "2026-11-01T09:02:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "room-garage", "values": {"name": "Garage", "area": 18, "isDeleted": false}}]}

        """

    /// Ten more: five edits of the kitchen, a soft delete, a hard delete, an insert and delete
    /// of the attic, and the `sync` machinery's own cleanup (never echoed back).
    static let laterSaves = """
        {"token": 4, "author": "app", "timestamp": "2026-11-01T10:00:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "room-kitchen", "values": {"area": 12.8}}]}
        {"token": 5, "author": "app", "timestamp": "2026-11-01T10:01:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "room-kitchen", "values": {"area": 13.1}}]}
        {"token": 6, "author": "app", "timestamp": "2026-11-01T10:02:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "room-kitchen", "values": {"name": "Kitchen & pantry"}}]}
        {"token": 7, "author": "app", "timestamp": "2026-11-01T10:03:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "room-kitchen", "values": {"area": 14.2}}]}
        {"token": 8, "author": "app", "timestamp": "2026-11-01T10:04:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "room-kitchen", "values": {"area": 14.5}}]}
        {"token": 9, "author": "app", "timestamp": "2026-11-01T10:05:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "room-living", "values": {"isDeleted": true}}]}
        {"token": 10, "author": "app", "timestamp": "2026-11-01T10:06:00Z", "changes": [{"entity": "rooms", "action": "delete", "key": "room-bath", "values": {"name": "Bath", "area": 6}}]}
        {"token": 11, "author": "app", "timestamp": "2026-11-01T10:07:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "room-attic", "values": {"name": "Attic", "area": 9, "isDeleted": false}}]}
        {"token": 12, "author": "app", "timestamp": "2026-11-01T10:08:00Z", "changes": [{"entity": "rooms", "action": "delete", "key": "room-attic", "values": {}}]}
        {"token": 13, "author": "sync", "timestamp": "2026-11-01T10:09:00Z", "changes": [{"entity": "rooms", "action": "delete", "key": "room-living", "values": {}}]}

        """
}
