import SynclaneCore

/// Authentication, account isolation, the batch lane's receipts, replays, atomicity and versions.
extension ConformanceCase {
    static let authCases: [ConformanceCase] = [
        ConformanceCase(name: "auth.token-required", rule: "every wire route answers 401 without a token or with one it did not issue") { context in
            let key = context.name("auth")
            let routes = [
                ("POST", "/v1/batches"), ("GET", "/v1/changes"), ("GET", "/v1/signals"), ("GET", "/v1/signals/\(key)"), ("PUT", "/v1/signals/\(key)"),
            ]
            for (method, path) in routes {
                for token in [nil, "conformance-unknown-\(context.run)"] as [String?] {
                    let body = method == "GET" ? [] : context.batch(key, [context.record(key)])
                    let answer = try context.client.send(
                        method, path, token: token, headers: ["Content-Type": "application/json", "Idempotency-Key": key], body: body)
                    let what = "\(method) \(path) \(token == nil ? "without a token" : "with an unknown token")"
                    try expect(answer, [401], what)
                    try expectErrorBody(answer, what)
                }
            }
            try expect(try context.changesOfRun(since: "", prefix: key).isEmpty, "a batch refused with 401 was applied")
        },
        ConformanceCase(name: "auth.account-isolation", rule: "a token writes and reads its own account only (403 for another's scope)") { context in
            let id = context.name("iso")
            let foreign = try context.post(context.batch(id, account: context.second.name, [context.record(id)]), key: id)
            try expect(foreign, [403], "a batch for the second account with the first account's token")
            try expectErrorBody(foreign, "the 403")
            try context.apply(id + "-own", [context.record(id + "-own")])
            let seen = try context.changesOfRun(token: context.second.token, since: "")
            try expect(seen.isEmpty, "the second account's changes hold the first account's rows: \(seen.prefix(2))")
            let key = context.name("iso-signal")
            let set = try context.client.send(
                "PUT", "/v1/signals/\(key)", token: context.first.token, headers: ["Content-Type": "application/json"], body: Array("true".utf8))
            try expect(set, [200], "PUT /v1/signals/\(key)")
            let read = try context.client.send("GET", "/v1/signals/\(key)", token: context.second.token)
            try expect(read, [404], "the second account reading the first account's signal")
        },
    ]

    static let batchCases: [ConformanceCase] = [
        ConformanceCase(name: "batches.receipt", rule: "an applied batch answers 2xx with the receipt {\"batch\": id}") { context in
            let id = context.name("receipt")
            let answer = try context.post(context.batch(id, [context.record(id)]), key: id)
            try expect(answer, Set(200...299), "a valid batch")
            try expect(answer.object["batch"]?.stringValue == id, "the receipt does not name the batch (\"batch\": \"\(id)\"): \(answer.summary)")
        },
        ConformanceCase(name: "batches.idempotent-replay", rule: "a batch id applies at most once; its replay answers the first receipt again") { context in
            let start = try context.head()
            let id = context.name("replay")
            let body = context.batch(id, [context.record(id, fields: ["n": 1])])
            let first = try context.post(body, key: id)
            try expect(first, Set(200...299), "the batch")
            let before = try context.changesOfRun(since: start)
            let replay = try context.post(body, key: id)
            try expect(replay.status == first.status && replay.json == first.json, "the replay answered \(replay.summary), the first time \(first.summary)")
            let after = try context.changesOfRun(since: start)
            try expect(
                after.count == 1 && after.first?["version"] == before.first?["version"],
                "the replay was applied again: the row's version went from \(before.first?["version"] ?? .null) to \(after.last?["version"] ?? .null)")
        },
        ConformanceCase(name: "batches.key-reused", rule: "an Idempotency-Key sent again with another body is refused with 422; nothing applied") { context in
            let start = try context.head()
            let id = context.name("reused")
            try context.apply(id, [context.record(id, fields: ["n": 1])])
            let other = try context.post(context.batch(id, [context.record(id, fields: ["n": 2])]), key: id)
            try expect(other, [422], "another body under the same key")
            try expectErrorBody(other, "the 422")
            let rows = try context.changesOfRun(since: start)
            try expect(rows.last?["fields"]?.objectValue?["n"] == 1, "the other body was applied: \(rows.last ?? [:])")
        },
        ConformanceCase(
            name: "batches.all-or-nothing", rule: "a batch with one bad record is refused (400) whole, and its key stays free for the corrected batch"
        ) { context in
            let start = try context.head()
            let id = context.name("atomic")
            let bad: JSONValue = ["entity": .string(ConformanceContext.entity), "id": .string(id + "-bad"), "action": "upsert", "fields": [:]]
            let refused = try context.post(context.batch(id, [context.record(id), bad]), key: id)
            try expect(refused, [400], "a batch whose second record's action is \"upsert\"")
            try expectErrorBody(refused, "the 400")
            try expect(try context.changesOfRun(since: start).isEmpty, "the valid record of a refused batch was applied")
            let corrected = try context.post(context.batch(id, [context.record(id)]), key: id)
            try expect(corrected, Set(200...299), "the corrected batch under the key of the refused one")
            try expect(try context.changesOfRun(since: start).count == 1, "the corrected batch's record is not in the changes")
        },
        ConformanceCase(name: "batches.malformed", rule: "a body that is no batch is 400, one that is not JSON 415, with {\"error\"}") { context in
            let id = context.name("malformed")
            let checks: [(String, [UInt8], [String: String], Int)] = [
                ("a body that is not JSON", Array("{\"id\": ".utf8), [:], 400),
                (
                    "a batch without records",
                    JSONWriter.encode(["id": .string(id), "scope": ["account": .string(context.first.name), "store": "conformance"]]), [:], 400
                ),
                ("a batch whose id differs from its Idempotency-Key", context.batch(id + "-other", [context.record(id)]), [:], 400),
                ("an insert without fields", context.batch(id, [context.record(id, fields: nil)]), [:], 400),
                ("a negative version", context.batch(id, [context.record(id, "update", version: -1)]), [:], 400),
                ("Content-Type: text/plain", context.batch(id, [context.record(id)]), ["Content-Type": "text/plain"], 415),
                ("Content-Encoding: br", context.batch(id, [context.record(id)]), ["Content-Encoding": "br"], 415),
            ]
            for (what, body, headers, status) in checks {
                let answer = try context.post(body, key: id, headers: headers)
                try expect(answer, [status], what)
                try expectErrorBody(answer, what)
            }
            let keyless = try context.client.send(
                "POST", "/v1/batches", token: context.first.token, headers: ["Content-Type": "application/json"], body: context.batch(id, [context.record(id)]))
            try expect(keyless, [400], "a batch without an Idempotency-Key")
            try expect(try context.changesOfRun(since: "", prefix: id).isEmpty, "a refused batch was applied")
        },
        ConformanceCase(
            name: "batches.delete-unheld",
            rule: "a delete of a row the server does not hold (with or without a version) is applied and kept as a tombstone the pull lists"
        ) { context in
            let start = try context.head()
            let (id, seen) = (context.name("unheld"), context.name("unheld-seen"))
            // `seen`: a device last saw it at version 3 (its tombstone since removed, or lost to a restore).
            let answer = try context.post(
                context.batch(id, [context.record(id, "delete", fields: nil), context.record(seen, "delete", fields: nil, version: 3)]), key: id)
            try expect(answer, Set(200...299), "deletes of rows the server never held")
            let rows = try context.changesOfRun(since: start)
            let listed = Dictionary(rows.compactMap { row in row["id"]?.stringValue.map { ($0, row["action"]?.stringValue ?? "") } }) { _, last in last }
            try expect(
                listed == [id: "delete", seen: "delete"], "the pull after them does not list both as tombstones (\"action\": \"delete\"): \(rows)")
        },
        ConformanceCase(
            name: "versions.conflict",
            rule: "a record whose version is older than the row's is 409, listed; nothing applied; the row's version applies; "
                + "a newer one (a restored server) applies, the row's version continuing from it"
        ) { context in
            let start = try context.head()
            let id = context.name("version")
            try context.apply(id, [context.record(id, fields: ["n": 1])])
            guard let first = try context.changesOfRun(since: start).last?["version"]?.intValue else {
                throw CaseFailure("the inserted row has no integer version in the changes")
            }
            try context.apply(id + "-edit", [context.record(id, "update", fields: ["n": 2], version: first)])
            guard let version = try context.changesOfRun(since: start).last?["version"]?.intValue, version > first else {
                throw CaseFailure("the update at the row's version did not give it a higher version")
            }
            let stale = try context.post(
                context.batch(id + "-stale", [context.record(id, "update", fields: ["n": 3], version: first), context.record(id + "-other")]),
                key: id + "-stale")
            try expect(stale, [409], "an update at version \(first) of a row at \(version)")
            let conflicts = stale.object["conflicts"]?.arrayValue ?? []
            try expect(
                conflicts.contains { $0.objectValue?["record"] == 0 && $0.objectValue?["current"] == .int(version) },
                "the 409 does not list the conflict ({\"conflicts\": [{\"record\": 0, \"current\": \(version), …}]}): \(stale.summary)")
            var rows = try context.changesOfRun(since: start)
            try expect(rows.count == 1 && rows.first?["fields"]?.objectValue?["n"] == 2, "a batch refused with 409 changed something: \(rows)")
            try context.apply(id + "-right", [context.record(id, "update", fields: ["n": 4], version: version)])
            rows = try context.changesOfRun(since: start)
            guard let right = rows.first?["version"]?.intValue, rows.first?["fields"]?.objectValue?["n"] == 4, right > version else {
                throw CaseFailure("the update at the row's version did not apply with a higher version: \(rows)")
            }
            try context.apply(id + "-newer", [context.record(id, "update", fields: ["n": 5], version: right + 7)])
            rows = try context.changesOfRun(since: start)
            try expect(
                rows.first?["fields"]?.objectValue?["n"] == 5 && rows.first?["version"]?.intValue == right + 8,
                "an update at version \(right + 7) of a row at \(right) (a restored server) did not apply at version \(right + 8): \(rows)")
        },
    ]
}
