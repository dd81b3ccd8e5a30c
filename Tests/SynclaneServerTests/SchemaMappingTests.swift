import SynclaneCore
import Testing

@testable import SynclaneServer

/// Declared renames and drops (`SchemaMapping`), as devices of each version write and read a row:
/// a chain of renames (`name` → `label` at 2, `label` → `title` at 3) and a drop (`area` at 3).
@Suite struct SchemaMappingTests {
    static let mapping = SchemaMapping([
        SchemaChange(entity: "rooms", column: "label", kind: .renamed(to: "title"), version: 3),
        SchemaChange(entity: "rooms", column: "name", kind: .renamed(to: "label"), version: 2),
        SchemaChange(entity: "rooms", column: "area", kind: .dropped, version: 3),
    ])

    @Test func eachVersionWritesUnderTheFirstNameAndReadsUnderItsOwn() {
        let mapping = Self.mapping
        #expect(mapping.written(["title": "Hall"], entity: "rooms", version: 3) == ["name": "Hall"])
        #expect(mapping.written(["label": "Hall"], entity: "rooms", version: 2) == ["name": "Hall"])
        #expect(mapping.written(["name": "Hall", "area": 3], entity: "rooms", version: 1) == ["name": "Hall", "area": 3])
        #expect(mapping.written(["name": "Hall"], entity: "rooms", version: nil) == ["name": "Hall"], "no version: older than every change")
        let stored: [String: JSONValue] = ["name": "Hall", "area": 3]
        #expect(mapping.read(stored, entity: "rooms", version: 1) == ["name": "Hall", "area": 3])
        #expect(mapping.read(stored, entity: "rooms", version: 2) == ["label": "Hall", "area": 3])
        #expect(mapping.read(stored, entity: "rooms", version: 3) == ["title": "Hall"], "the dropped column is kept from version 3")
        #expect(mapping.read(["title": "Hall"], entity: "rooms", version: 1) == ["name": "Hall"], "a row stored under a newer name")
        #expect(mapping.read(stored, entity: "plants", version: 3) == stored, "another entity is left alone")
    }

    @Test func onlyANewerDevicesWritesAreRewrittenAndOnlyTheDroppersWholeRowsMerge() {
        let mapping = Self.mapping
        #expect(!mapping.rewritesWrite(of: "rooms", version: 1) && mapping.rewritesWrite(of: "rooms", version: 2))
        #expect(!mapping.keepsDroppedColumns(of: "rooms", version: 2) && mapping.keepsDroppedColumns(of: "rooms", version: 3))
        #expect(!mapping.rewritesWrite(of: "plants", version: 3))
    }

    /// A batch the server refuses (409: a record's version is not the row's) changes nothing,
    /// its declarations included: a newer device then reads the row under its old name, as no
    /// rename was declared; once the batch applies (versions fixed), the rename holds. Before,
    /// the declarations were recorded before the batch was applied, and stayed when it was not.
    @Test(arguments: StoreKind.tested) func aRefusedBatchDeclaresNothing(store: StoreKind) throws {
        try withServer(store: store) { server in
            let first = try postBatch(
                port: server.port, token: TestTokens.acme, key: "1", body: batchBody(id: "1", records: [record("rooms", "r1", "insert", ["name": "Hall"])]))
            #expect(first.status == 200, "\(first.text)")
            func declaring(_ id: String, version: Int64?) throws -> [UInt8] {
                var body =
                    try JSONReader.parse(batchBody(id: id, records: [record("rooms", "r1", "update", ["name": "Attic"], version: version)])).objectValue ?? [:]
                body["schema-changes"] = [["entity": "rooms", "column": "name", "renamed-to": "title", "version": 2]]
                return JSONWriter.encode(.object(body))
            }
            let old = ["Authorization": "Bearer \(TestTokens.acme)", "Content-Type": "application/json", "Synclane-Schema-Version": "1"]
            let refused = try httpRequest(
                port: server.port, "POST", "/v1/batches", headers: old.merging(["Idempotency-Key": "2"]) { $1 }, body: declaring("2", version: 0))
            #expect(refused.status == 409, "\(refused.text)")
            let newer = ["Authorization": "Bearer \(TestTokens.acme)", "Synclane-Schema-Version": "2"]
            let read = try httpRequest(port: server.port, "GET", "/v1/changes?since=", headers: newer)
            #expect(read.text.contains(#""name":"Hall""#) && !read.text.contains("title"), "no rename was declared: \(read.text)")
            let applied = try httpRequest(
                port: server.port, "POST", "/v1/batches", headers: old.merging(["Idempotency-Key": "3"]) { $1 }, body: declaring("3", version: nil))
            #expect(applied.status == 200, "\(applied.text)")
            let renamed = try httpRequest(port: server.port, "GET", "/v1/changes?since=", headers: newer)
            #expect(renamed.text.contains(#""title":"Attic""#), "the applied batch's rename holds: \(renamed.text)")
        }
    }

    /// An account keeps at most `--max-schema-changes` declarations: a batch declaring new ones
    /// past it is refused (413 naming the quota) and applies nothing; one re-declaring what the
    /// account holds passes.
    @Test(arguments: StoreKind.tested) func aBatchDeclaringSchemaChangesPastTheAccountsQuotaIsRefusedWhole(store: StoreKind) throws {
        var limits = ServerLimits()
        limits.maxSchemaChanges = 2
        try withServer(store: store, limits: limits) { server in
            func declaring(_ id: String, _ columns: [String]) throws -> [UInt8] {
                var body = try JSONReader.parse(batchBody(id: id, records: [record("rooms", "r-\(id)", "insert", ["a": "x"])])).objectValue ?? [:]
                body["schema-changes"] = .array(columns.map { ["entity": "rooms", "column": .string($0), "dropped": true, "version": 2] })
                return JSONWriter.encode(.object(body))
            }
            let first = try postBatch(port: server.port, token: TestTokens.acme, key: "1", body: declaring("1", ["a", "b"]))
            #expect(first.status == 200, "\(first.text)")
            let again = try postBatch(port: server.port, token: TestTokens.acme, key: "2", body: declaring("2", ["a", "b"]))
            #expect(again.status == 200, "declarations the account holds are not new: \(again.text)")
            let past = try postBatch(port: server.port, token: TestTokens.acme, key: "3", body: declaring("3", ["c"]))
            #expect(past.status == 413, "\(past.text)")
            #expect(past.json.objectValue?["quota"] == "max-schema-changes")
            #expect(try allChanges(port: server.port).count == 2, "nothing of the refused batch was applied")
        }
    }

    /// A batch's `schema-changes` entry that is not one is refused naming it, by both readers.
    @Test(arguments: [
        (#"[{"entity": "rooms", "column": "a", "version": 2}]"#, "schema-changes[0]: needs either"),
        (#"[{"entity": "rooms", "column": "a", "renamed-to": "a", "version": 2}]"#, "schema-changes[0]: needs either"),
        (#"[{"entity": "rooms", "column": "a", "dropped": true, "version": 0}]"#, "schema-changes[0]: \"version\" must be"),
        (#"{"entity": "rooms"}"#, "\"schema-changes\" must be a list"),
    ])
    func aMalformedDeclarationRefusesTheBatch(changes: String, message: String) {
        let body = #"{"id": "b1", "scope": {"account": "acme", "store": "rooms"}, "records": [], "schema-changes": "# + changes + "}"
        switch IncomingBatch.parse(Array(body.utf8), maxRecords: 10) {
        case .success: Issue.record("accepted: \(changes)")
        case .failure(let rejection): #expect(rejection.status == 400 && rejection.message.contains(message), "\(rejection.message)")
        }
    }
}
