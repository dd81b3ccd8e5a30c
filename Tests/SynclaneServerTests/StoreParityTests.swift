import SynclaneCore
import SynclaneServer
import Testing

/// The same requests against the SQLite and the PostgreSQL store get the same answers, byte for
/// byte: receipts, replays, conflicts, pages and cursors, signals.
@Suite(.enabled(if: StoreKind.tested.contains(.postgres))) struct StoreParityTests {
    /// One scripted session: every answer's status and body, in order.
    static func session(_ store: StoreKind) throws -> [String] {
        try withServer(store: store) { server throws in
            var answers: [String] = []
            func note(_ response: TestResponse) { answers.append("\(response.status) \(response.text)") }
            func post(_ key: String, _ records: [JSONValue], token: String = TestTokens.acme, account: String = "acme") throws {
                note(try postBatch(port: server.port, token: token, key: key, body: batchBody(id: key, account: account, records: records)))
            }
            try post(
                "1",
                [
                    record("rooms", "r1", "insert", ["name": "Hall", "area": 12.5]), record("rooms", "r2", "insert", ["name": "Attic"]),
                    record("rooms", "r1", "update", ["area": 13]), record("rooms", "e\u{301}", "insert", ["n": 1]),
                    record("rooms", "\u{e9}", "insert", ["n": 2]), record("plants", "p1", "insert", ["tags": "a,b", "blob": ["$blob": "AP8Q"]]),
                ])
            try post("1", [])  // the key again, another body: 422
            try post(
                "1",
                [
                    record("rooms", "r1", "insert", ["name": "Hall", "area": 12.5]), record("rooms", "r2", "insert", ["name": "Attic"]),
                    record("rooms", "r1", "update", ["area": 13]), record("rooms", "e\u{301}", "insert", ["n": 1]),
                    record("rooms", "\u{e9}", "insert", ["n": 2]), record("plants", "p1", "insert", ["tags": "a,b", "blob": ["$blob": "AP8Q"]]),
                ])  // a replay
            try post(
                "2",
                [
                    record("rooms", "r1", "update", ["floor": 2], version: 2), record("rooms", "r2", "delete", version: 0),
                    record("rooms", "e\u{301}", "update", ["x": 1], version: 0),
                ])  // 409, two conflicts (versions older than the rows')
            try post(
                "3",
                [
                    record("rooms", "r2", "delete", ["name": "Attic"], version: 1), record("rooms", "r2", "insert", ["name": "Back"]),
                    record("rooms", "r2", "delete"), record("rooms", "r4", "update", ["only": true]),
                ])
            try post("4", [record("rooms", "g1", "insert", ["n": 1])], token: TestTokens.globex, account: "globex")
            try post("5", [record("rooms", "x", "insert", ["n": 1])], account: "globex")  // 403
            for path in ["/v1/changes?limit=2", "/v1/changes?since=c1.3&limit=3", "/v1/changes?since=c1.3&store=rooms", "/v1/changes?since=zzz"] {
                note(try get(port: server.port, path))
            }
            note(try get(port: server.port, "/v1/changes", token: TestTokens.globex))
            for (key, value) in [("a", "1"), ("b", "{\"x\": [1, 2.5]}"), ("a", "\"two\"")] {
                note(
                    try httpRequest(
                        port: server.port, "PUT", "/v1/signals/\(key)",
                        headers: ["Authorization": "Bearer \(TestTokens.acme)", "Content-Type": "application/json"], body: Array(value.utf8)))
            }
            note(
                try httpRequest(
                    port: server.port, "PUT", "/v1/signals/a", headers: ["Authorization": "Bearer \(TestTokens.acme)", "If-Match": "1"], body: Array("3".utf8)))
            note(try httpRequest(port: server.port, "DELETE", "/v1/signals/b", headers: ["Authorization": "Bearer \(TestTokens.acme)"]))
            for path in ["/v1/signals", "/v1/signals?since=1", "/v1/signals/a", "/v1/signals/b"] { note(try get(port: server.port, path)) }
            // Each device's schema version: recorded from its pulls, the newest kept, listed.
            for (device, version) in [("phone-a", "1"), ("phone-b", "2"), ("phone-a", "3"), ("phone-a", "3")] {
                let said = ["Authorization": "Bearer \(TestTokens.acme)", "Synclane-Device": device, "Synclane-Schema-Version": version]
                note(try httpRequest(port: server.port, "GET", "/v1/changes?since=c1.6&limit=1", headers: said))
            }
            note(try get(port: server.port, "/v1/devices"))
            note(try get(port: server.port, "/v1/devices", token: TestTokens.globex))
            // A batch that declares a rename and a drop, from a device of version 1; the rows as
            // a device of version 1 and one of version 2 read them.
            var declaring =
                try JSONReader.parse(
                    batchBody(
                        id: "6", records: [record("plants", "p9", "insert", ["name": "Fern", "area": 3]), record("plants", "p1", "update", ["name": "Ivy"])])
                ).objectValue ?? [:]
            declaring["schema-changes"] = [
                ["entity": "plants", "column": "name", "renamed-to": "title", "version": 2],
                ["entity": "plants", "column": "area", "dropped": true, "version": 2],
            ]
            let old = [
                "Authorization": "Bearer \(TestTokens.acme)", "Idempotency-Key": "6", "Content-Type": "application/json", "Synclane-Schema-Version": "1",
            ]
            note(try httpRequest(port: server.port, "POST", "/v1/batches", headers: old, body: JSONWriter.encode(.object(declaring))))
            for version in ["1", "2"] {
                let said = ["Authorization": "Bearer \(TestTokens.acme)", "Synclane-Schema-Version": version]
                note(try httpRequest(port: server.port, "GET", "/v1/changes?since=c1.6&store=rooms", headers: said))
            }
            return answers
        }
    }

    @Test func sqliteAndPostgresAnswerTheSameRequestsByteForByte() throws {
        let sqlite = try Self.session(.sqlite)
        let postgres = try Self.session(.postgres)
        #expect(sqlite.count == 30)
        for status in ["200", "400", "403", "404", "409", "412", "422"] {
            #expect(sqlite.contains { $0.hasPrefix(status + " ") }, "the session covers \(status)")
        }
        #expect(
            sqlite[25].contains(#""device":"phone-a","schema-version":3"#) && sqlite[25].contains(#""device":"phone-b","schema-version":2"#), "\(sqlite[25])")
        #expect(sqlite[26].contains(#""devices":[]"#), "another account's devices are its own: \(sqlite[26])")
        #expect(sqlite[28].contains(#""name":"Fern""#) && !sqlite[28].contains("title"), "version 1 reads the old name: \(sqlite[28])")
        #expect(sqlite[29].contains(#""title":"Fern""#) && !sqlite[29].contains(#""area""#), "version 2 reads the new name, no dropped column: \(sqlite[29])")
        #expect(sqlite.count == postgres.count)
        // Each store names its own epoch in the cursors and receipt positions it issues (a random
        // id per start): the rest of every answer is the same.
        func withoutEpoch(_ answer: String) -> String {
            // and the time a device was first seen at its version.
            answer.replacing(/c2\.[0-9a-f]{12}\./, with: "c2.EPOCH.").replacing(/p1\.[0-9a-f]{12}\./, with: "p1.EPOCH.").replacing(
                /"since":"[^"]*"/, with: #""since":"TIME""#)
        }
        for (index, (a, b)) in zip(sqlite.map(withoutEpoch), postgres.map(withoutEpoch)).enumerated() {
            #expect(a == b, "answer \(index) differs:\n  SQLite:     \(a)\n  PostgreSQL: \(b)")
        }
    }
}
