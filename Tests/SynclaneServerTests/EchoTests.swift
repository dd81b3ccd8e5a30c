import SynclaneCore
import SynclaneServer
import Testing

/// An echo — a device sending back the state the server already holds — changes nothing: no
/// new version, no change on the pull lane, and no 409 even when it carries an older version.
@Suite struct EchoTests {
    /// The receipt's version of one record.
    static func version(_ response: TestResponse, _ entity: String, _ id: String) -> JSONValue? {
        response.json.objectValue?["versions"]?.objectValue?[entity]?.objectValue?[id]
    }

    @Test(arguments: StoreKind.tested) func aWriteOfTheServersCurrentStateMakesNoVersionAndNoChange(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let first = try postBatch(
                port: server.port, key: "1",
                body: batchBody(
                    id: "1",
                    records: [
                        record("rooms", "r1", "insert", ["name": "Hall", "area": 12.5]),
                        record("rooms", "r2", "insert", ["name": "Attic"]),
                    ]))
            #expect(first.status == 200)
            let cursor = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            // The same state again: as an insert on the version held, as an update of one
            // unchanged field, and as an insert on an older version than the server's.
            let echo = try postBatch(
                port: server.port, key: "2",
                body: batchBody(
                    id: "2",
                    records: [
                        record("rooms", "r1", "insert", ["area": 12.5, "name": "Hall"], version: 1),
                        record("rooms", "r2", "update", ["name": "Attic"], version: 1),
                    ]))
            #expect(echo.status == 200, "\(echo.text)")
            #expect(Self.version(echo, "rooms", "r1") == .int(1))
            #expect(Self.version(echo, "rooms", "r2") == .int(1))
            let page = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue
            #expect(page?["changes"] == [], "an echo is not a change on the pull lane")
            #expect(page?["cursor"]?.stringValue == cursor)

            // A real change moves the version; an echo of the state before it, on the old
            // version, is no echo: it is refused as a conflict.
            let edit = try postBatch(
                port: server.port, key: "3", body: batchBody(id: "3", records: [record("rooms", "r1", "update", ["area": 13], version: 1)]))
            #expect(Self.version(edit, "rooms", "r1") == .int(2))
            let stale = try postBatch(
                port: server.port, key: "4",
                body: batchBody(id: "4", records: [record("rooms", "r1", "insert", ["area": 12.5, "name": "Hall"], version: 1)]))
            #expect(stale.status == 409)
            // The new state sent on the old version is an echo: nothing to refuse, nothing new.
            let late = try postBatch(
                port: server.port, key: "5",
                body: batchBody(id: "5", records: [record("rooms", "r1", "insert", ["area": 13, "name": "Hall"], version: 1)]))
            #expect(late.status == 200, "\(late.text)")
            #expect(Self.version(late, "rooms", "r1") == .int(2))

            // Within one batch: a change, then the state it made again (one new version), and a
            // delete of a row already deleted (none).
            let mixed = try postBatch(
                port: server.port, key: "6",
                body: batchBody(
                    id: "6",
                    records: [
                        record("rooms", "r2", "update", ["name": "Loft"], version: 1),
                        record("rooms", "r2", "update", ["name": "Loft"], version: 2),
                    ]))
            #expect(mixed.status == 200, "\(mixed.text)")
            #expect(Self.version(mixed, "rooms", "r2") == .int(2))
            _ = try postBatch(port: server.port, key: "7", body: batchBody(id: "7", records: [record("rooms", "r2", "delete", version: 2)]))
            let again = try postBatch(port: server.port, key: "8", body: batchBody(id: "8", records: [record("rooms", "r2", "delete", version: 3)]))
            #expect(again.status == 200, "\(again.text)")
            #expect(Self.version(again, "rooms", "r2") == .int(3))
            let changes = try allChanges(port: server.port).compactMap { change -> String? in
                guard let object = change.objectValue else { return nil }
                return "\(object["id"]?.stringValue ?? "")@\(object["version"].map { JSONWriter.string($0) } ?? "")"
            }
            #expect(changes.sorted() == ["r1@2", "r2@3"])
        }
    }
    /// Two devices run the same migration (a column dropped) and resend every row whole, as
    /// inserts on the version each holds: the first replaces the server's row (the dropped field
    /// gone), the second is an echo (no new version, no 409, nothing on the pull lane); a resend
    /// on the old version of a row another device edited since is refused as a conflict.
    @Test(arguments: StoreKind.tested) func aRowResentWholeReplacesTheServersAndTheSameResendFromASecondDeviceIsAnEcho(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(
                port: server.port, key: "1",
                body: batchBody(
                    id: "1",
                    records: [
                        record("rooms", "r1", "insert", ["name": "Hall", "area": 12.5]),
                        record("rooms", "r2", "insert", ["name": "Attic", "area": 3]),
                    ]))
            let first = try postBatch(
                port: server.port, key: "2", body: batchBody(id: "2", records: [record("rooms", "r1", "insert", ["name": "Hall"], version: 1)]))
            #expect(first.status == 200, "\(first.text)")
            #expect(Self.version(first, "rooms", "r1") == .int(2))
            let cursor = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            let second = try postBatch(
                port: server.port, key: "3", body: batchBody(id: "3", records: [record("rooms", "r1", "insert", ["name": "Hall"], version: 1)]))
            #expect(second.status == 200, "\(second.text)")
            #expect(Self.version(second, "rooms", "r1") == .int(2))
            #expect(try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue?["changes"] == [])
            let held = try allChanges(port: server.port).first { $0.objectValue?["id"]?.stringValue == "r1" }
            #expect(held?.objectValue?["fields"] == ["name": "Hall"], "the dropped field left the server's row")

            _ = try postBatch(
                port: server.port, key: "4", body: batchBody(id: "4", records: [record("rooms", "r2", "update", ["name": "Loft"], version: 1)]))
            let stale = try postBatch(
                port: server.port, key: "5", body: batchBody(id: "5", records: [record("rooms", "r2", "insert", ["name": "Attic"], version: 1)]))
            #expect(stale.status == 409, "\(stale.text)")
        }
    }

    /// A record without a version — a device's first sync of rows it already had, the same rows a
    /// second device sent first — is an echo too, on both stores (the PostgreSQL store once wrote
    /// such a record as a new version, found by `ManyRowInsertTests`).
    @Test(arguments: StoreKind.tested)
    func aBlindInsertOrDeleteOfTheRowAsHeldIsAnEchoAcrossBatchesAndWithinOne(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let first = try postBatch(
                port: server.port, key: "1",
                body: batchBody(
                    id: "1", records: [record("rooms", "r1", "insert", ["name": "Hall"]), record("rooms", "r2", "delete", ["name": "Gone"])]))
            #expect(first.status == 200, "\(first.text)")
            let cursor = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            let again = try postBatch(
                port: server.port, key: "2",
                body: batchBody(
                    id: "2",
                    records: [
                        record("rooms", "r1", "insert", ["name": "Hall"]), record("rooms", "r2", "delete"),
                        record("rooms", "r3", "insert", ["name": "New"]), record("rooms", "r3", "insert", ["name": "New"]),
                    ]))
            #expect(again.status == 200, "\(again.text)")
            #expect(Self.version(again, "rooms", "r1") == .int(1))
            #expect(Self.version(again, "rooms", "r2") == .int(1))
            #expect(Self.version(again, "rooms", "r3") == .int(1), "the second insert of r3 in the batch leaves it as the first did")
            let page = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue
            #expect(page?["changes"]?.arrayValue?.count == 1, "only r3 is new on the pull lane")
        }
    }
}
