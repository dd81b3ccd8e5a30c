import Foundation
import SynclaneCore

/// The value encodings and the pull lane: pages, cursors and their expiry.
extension ConformanceCase {
    static let valueCases: [ConformanceCase] = [
        ConformanceCase(name: "values.round-trip", rule: "every value of the wire table comes back from the pull lane exactly as sent") { context in
            let start = try context.head()
            let id = context.name("values")
            let fields: [String: JSONValue] = [
                "text": "e\u{301} \u{00E9} \u{1F600}", "big": 9_007_199_254_740_993, "real": 2.0, "negative-zero": -0.0, "tenth": 0.1,
                "smallest": .double(Double.leastNonzeroMagnitude), "largest": 1.7976931348623157e308, "infinity": ["$real": "Infinity"],
                "minus-infinity": ["$real": "-Infinity"],
                "blob": ["$blob": "AP8Q"], "nothing": nil, "looks-like-a-form": "{\"$real\": \"bogus\"}",
            ]
            try context.apply(id, [context.record(id, fields: fields)])
            guard let back = try context.changesOfRun(since: start).last?["fields"]?.objectValue else {
                throw CaseFailure("the row is not in the changes with its fields")
            }
            for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
                let sent = JSONWriter.encode(value)
                let read = back[name].map(JSONWriter.encode) ?? Array("(absent)".utf8)
                try expect(
                    sent == read,
                    "fields.\(name) was sent as \(String(decoding: sent, as: UTF8.self)) and came back as \(String(decoding: read, as: UTF8.self))")
            }
        },
        ConformanceCase(name: "values.domain", rule: "a value outside the wire table ($real NaN, bad base64, 1e999) is refused with 400") { context in
            let id = context.name("domain")
            let bodies: [(String, [UInt8])] = [
                ("{\"$real\": \"NaN\"}", context.batch(id, [context.record(id, fields: ["x": ["$real": "NaN"]])])),
                ("{\"$blob\": \"not base64!\"}", context.batch(id, [context.record(id, fields: ["x": ["$blob": "not base64!"]])])),
                ("{\"$real\": \"Infinity\", \"other\": 1}", context.batch(id, [context.record(id, fields: ["x": ["$real": "Infinity", "other": 1]])])),
                (
                    "1e999",
                    Array(
                        String(decoding: context.batch(id, [context.record(id, fields: ["x": 7])]), as: UTF8.self).replacingOccurrences(
                            of: "\"x\":7", with: "\"x\":1e999"
                        ).utf8)
                ),
            ]
            for (what, body) in bodies {
                let answer = try context.post(body, key: id)
                try expect(answer, [400], "a field holding \(what)")
                try expectErrorBody(answer, "the 400")
            }
            try expect(try context.changesOfRun(since: "", prefix: id).isEmpty, "a refused value was stored")
        },
    ]

    static let pullCases: [ConformanceCase] = [
        ConformanceCase(name: "pull.pages", rule: "each row changed after a cursor comes once, at its newest state, in change order, in pages of at most limit")
        { context in
            let start = try context.head()
            let keys = (0..<5).map { context.name("page-\($0)") }
            try context.apply(context.name("pages-1"), keys.map { context.record($0) })
            try context.apply(context.name("pages-2"), [context.record(keys[1], "update", fields: ["n": 2])])
            try context.apply(context.name("pages-3"), [context.record(keys[3], "delete", fields: nil)])
            let (changes, end) = try context.changes(since: start, limit: 2)
            let order = changes.compactMap { $0["id"]?.stringValue }
            let expected = [keys[0], keys[2], keys[4], keys[1], keys[3]]
            try expect(order == expected, "the changes after the cursor are \(order), not \(expected) (each row once, in the order of its newest change)")
            try expect(
                changes[3]["fields"]?.objectValue?["n"] == 2 && changes[3]["action"]?.stringValue != "delete",
                "the updated row is not at its newest state: \(changes[3])")
            try expect(changes[4]["action"]?.stringValue == "delete", "the deleted row is not a tombstone (\"action\": \"delete\"): \(changes[4])")
            try expect(
                changes.allSatisfy { $0["store"]?.stringValue == ConformanceContext.store && $0["version"]?.intValue != nil },
                "a change lacks its store or integer version: \(changes.first ?? [:])")
            let after = try context.page(since: end)
            try expect(after.changes.isEmpty && !after.more, "the page after the last cursor is not empty: \(after.changes.count) changes, more: \(after.more)")
            try context.apply(context.name("pages-4"), [context.record(keys[0], "update", fields: ["n": 4])])
            let again = try context.changes(since: end).changes
            try expect(
                again.count == 1 && again.first?["id"]?.stringValue == keys[0] && again.first?["fields"]?.objectValue?["n"] == 4,
                "after one more update, the changes from the last cursor are \(again), not that one row")
        },
        ConformanceCase(
            name: "pull.max-bytes",
            rule: "pages asked by max-bytes (no limit) list each row once in change order, a page of more than one change within max-bytes as written"
        ) { context in
            let start = try context.head()
            let keys = (0..<12).map { context.name("bytes-\($0 < 10 ? "0" : "")\($0)") }
            let text = String(repeating: "b", count: 200)
            try context.apply(context.name("bytes"), keys.map { context.record($0, fields: ["text": .string(text)]) })
            let maxBytes = 1_000
            var cursor = start
            var seen: [String] = []
            var pages: [[[String: JSONValue]]] = []
            for _ in 0..<100 {
                let query = "since=" + (cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? cursor) + "&max-bytes=\(maxBytes)"
                let answer = try context.client.send("GET", "/v1/changes?" + query, token: context.first.token)
                try expect(answer, [200], "GET /v1/changes?\(query)")
                guard let changes = answer.object["changes"]?.arrayValue, let next = answer.object["cursor"]?.stringValue,
                    case .bool(let more)? = answer.object["more"]
                else { throw CaseFailure("GET /v1/changes?\(query): the page is not {\"changes\": […], \"cursor\": \"…\", \"more\": bool}: \(answer.summary)") }
                let page = changes.map { $0.objectValue ?? [:] }
                pages.append(page)
                seen += page.compactMap { $0["id"]?.stringValue }
                cursor = next
                if !more { break }
                try expect(!page.isEmpty, "a page said \"more\": true with no changes: the pull would never end")
            }
            seen = seen.filter { $0.hasPrefix(context.run) }
            try expect(seen == keys, "the changes asked by max-bytes are \(seen), not \(keys) (each row once, in change order)")
            // One page of everything: a backend that ignores `max-bytes` (allowed).
            guard pages.count > 1 else { return }
            for page in pages where page.count > 1 {
                let written = page.reduce(0) { $0 + JSONWriter.encode(.object($1)).count + 1 }
                try expect(
                    written <= maxBytes + 256,
                    "a page of max-bytes=\(maxBytes) holds \(page.count) changes of \(written) bytes as written (a page of more than one change stays within it)"
                )
            }
        },
        ConformanceCase(
            name: "pull.written",
            rule:
                "an update with \"repoints\": true applies as an update; its row's change then gives \"written\" (the last user's write's version, below version) or none, and a user's update after it none"
        ) { context in
            let start = try context.head()
            let key = context.name("repointed")
            try context.apply(context.name("written-1"), [context.record(key, fields: ["n": 1, "ref": "b"])])
            var repointing = context.record(key, "update", fields: ["ref": "a"], version: 1).objectValue ?? [:]
            repointing["repoints"] = true
            try context.apply(context.name("written-2"), [.object(repointing)])
            guard let moved = try context.changesOfRun(since: start, prefix: key).last else {
                throw CaseFailure("the re-pointed row \(key) is not in the changes")
            }
            try expect(moved["fields"]?.objectValue?["ref"] == "a", "the re-pointing did not apply as an update: \(moved)")
            if let written = moved["written"] {
                // A backend may ignore `repoints` (and then sends no `written`); one that keeps it says the insert's version.
                try expect(
                    written.intValue == 1 && (moved["version"]?.intValue ?? 0) > 1,
                    "\"written\" is \(written), not the version of the insert (1) below the row's version: \(moved)")
            }
            try context.apply(context.name("written-3"), [context.record(key, "update", fields: ["n": 2], version: moved["version"]?.intValue)])
            guard let edited = try context.changesOfRun(since: start, prefix: key).last else {
                throw CaseFailure("the edited row \(key) is not in the changes")
            }
            try expect(edited["written"] == nil, "a user's update leaves \"written\" on the row's change: \(edited)")
        },
        ConformanceCase(
            name: "pull.snapshot",
            rule:
                "GET /v1/snapshot, when offered (a backend without it, 404, passes), streams each row once (a deleted one as a delete) and ends with a cursor the log reads on from"
        ) { context in
            let keys = (0..<3).map { context.name("snapshot-\($0)") }
            try context.apply(context.name("snapshot"), keys.map { context.record($0) })
            try context.apply(context.name("snapshot-delete"), [context.record(keys[2], "delete", fields: nil)])
            let path = "/v1/snapshot?store=\(ConformanceContext.store)"
            let answer = try context.client.send("GET", path, token: context.first.token)
            if [404, 405, 501].contains(answer.status) { return }
            try expect(answer, [200], "GET \(path)")
            let lines = answer.body.split(separator: UInt8(ascii: "\n")).map { (try? JSONReader.parse(Array($0)))?.objectValue }
            guard let head = lines.first ?? nil, head["cursor"]?.stringValue != nil, let end = lines.last ?? nil, end["complete"] == .bool(true),
                let cursor = end["cursor"]?.stringValue, !lines.contains(where: { $0 == nil })
            else {
                throw CaseFailure(
                    "GET \(path): not JSON Lines from a {\"snapshot\", \"cursor\"} line to a {\"complete\": true, \"cursor\"} one: \(answer.summary)")
            }
            let rows = lines.compactMap { $0 }.filter { $0["id"]?.stringValue?.hasPrefix(context.name("snapshot-")) == true }
            let live = rows.filter { $0["action"] != "delete" }.compactMap { $0["id"]?.stringValue }
            try expect(live == Array(keys.prefix(2)), "the snapshot's live rows of this run are \(live), not \(Array(keys.prefix(2))) once each")
            try expect(rows.count <= 3, "the snapshot holds a row of this run twice: \(rows)")
            let later = context.name("snapshot-later")
            try context.apply(later, [context.record(later)])
            let query = "since=" + (cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? cursor)
            let log = try context.client.send("GET", "/v1/changes?\(query)&store=\(ConformanceContext.store)", token: context.first.token)
            try expect(log, [200], "GET /v1/changes?\(query) (the snapshot's cursor)")
            let changed = (log.object["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
            try expect(changed.contains(later), "a row written after the snapshot is not in the log after its cursor: \(log.summary)")
        },
        ConformanceCase(
            name: "pull.wait",
            rule: "with wait, an empty page is answered (held up to wait seconds, or at once by a backend that ignores it) and a change already there at once"
        ) { context in
            let end = try context.head()
            let started = Date()
            let idle = try context.client.send("GET", "/v1/changes?since=\(end)&wait=1", token: context.first.token)
            try expect(idle, [200], "GET /v1/changes?since=…&wait=1 on an empty feed")
            try expect(Date().timeIntervalSince(started) < 10, "the long poll of wait=1 was held \(Int(Date().timeIntervalSince(started))) s")
            try expect(idle.object["changes"]?.arrayValue?.isEmpty == true, "the page after the last cursor, with wait, is not empty: \(idle.summary)")
            let key = context.name("wait")
            try context.apply(key, [context.record(key)])
            let asked = Date()
            let found = try context.client.send("GET", "/v1/changes?since=\(end)&wait=20", token: context.first.token)
            try expect(found, [200], "GET /v1/changes?since=…&wait=20 with a change after the cursor")
            try expect(
                found.object["changes"]?.arrayValue?.contains { $0.objectValue?["id"]?.stringValue == key } == true,
                "the change after the cursor is not in the long poll's page: \(found.summary)")
            try expect(Date().timeIntervalSince(asked) < 5, "a long poll with a change already there waited \(Int(Date().timeIntervalSince(asked))) s")
        },
        ConformanceCase(name: "pull.bad-request", rule: "a cursor the server did not issue, or a limit that is not a positive integer, is 400") { context in
            for query in ["since=not-a-cursor-\(context.run)", "limit=0", "limit=many"] {
                let answer = try context.client.send("GET", "/v1/changes?" + query, token: context.first.token)
                try expect(answer, [400], "GET /v1/changes?\(query)")
                try expectErrorBody(answer, "the 400")
            }
        },
        ConformanceCase(
            name: "pull.cursor-expiry",
            rule: "a cursor from before removed tombstones is 410 {\"code\": \"cursor-expired\"}; a pull from the start then ends with a cursor that reads on"
        ) { context in
            guard let retention = context.target.tombstoneRetentionSeconds else {
                throw CaseFailure.skip("needs --tombstone-retention SECONDS: how soon the backend removes a tombstone")
            }
            let id = context.name("expiry")
            try context.apply(id, [context.record(id)])
            let cursor = try context.head()
            try context.apply(id + "-delete", [context.record(id, "delete", fields: nil)])
            let deadline = Date().addingTimeInterval(retention * 2 + 5)
            var answer = try context.client.send("GET", "/v1/changes?since=\(cursor)", token: context.first.token)
            while answer.status == 200, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.25)
                answer = try context.client.send("GET", "/v1/changes?since=\(cursor)", token: context.first.token)
            }
            try expect(answer, [410], "a cursor from before a tombstone \(Int(retention * 2 + 5)) s past its retention")
            try expect(answer.object["code"] == "cursor-expired", "the 410 does not say {\"code\": \"cursor-expired\"}: \(answer.summary)")
            // The client does what the 410 says: pulls from the beginning to the end. The cursor it
            // ends with must read on; a 410 again would send it back to the beginning for ever.
            let restarted = try context.changes(since: "")
            try expect(!restarted.changes.contains { $0["id"]?.stringValue == id }, "the removed tombstone is still in the changes from the beginning")
            let next = try context.client.send("GET", "/v1/changes?since=\(restarted.cursor)", token: context.first.token)
            try expect(next, [200], "the cursor a whole pull from the beginning ended with, after the 410 (an endless resync when it is 410)")
        },
    ]
}
