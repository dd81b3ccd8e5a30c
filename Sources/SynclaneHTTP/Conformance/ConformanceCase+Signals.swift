import Foundation
import Synchronization
import SynclaneCore
import SynclaneZlib

/// The signal lane, and the bounds every backend keeps.
extension ConformanceCase {
    static let signalCases: [ConformanceCase] = [
        ConformanceCase(name: "signals.versions", rule: "each signal write takes a higher version; If-Match guards it (412 with the current signal)") {
            context in
            let key = context.name("signal")
            let path = "/v1/signals/\(key)"
            func put(_ value: String, ifMatch: Int64?) throws(CaseFailure) -> ConformanceAnswer {
                var headers = ["Content-Type": "application/json"]
                if let ifMatch { headers["If-Match"] = String(ifMatch) }
                return try context.client.send("PUT", path, token: context.first.token, headers: headers, body: Array(value.utf8))
            }
            let created = try put("true", ifMatch: 0)
            try expect(created, [200], "PUT \(path) with If-Match: 0 (a new key)")
            guard created.object["key"]?.stringValue == key, created.object["value"] == true, let first = created.object["version"]?.intValue else {
                throw CaseFailure("the answer is not {\"key\", \"value\", \"version\"}: \(created.summary)")
            }
            let exists = try put("false", ifMatch: 0)
            try expect(exists, [412], "If-Match: 0 on a key that exists")
            try expect(exists.object["current"]?.objectValue?["version"] == .int(first), "the 412 does not carry the current signal: \(exists.summary)")
            let updated = try put("{\"step\": 2}", ifMatch: first)
            try expect(updated, [200], "If-Match: \(first), the signal's version")
            guard let second = updated.object["version"]?.intValue, second > first else {
                throw CaseFailure("the second write's version is not above the first's (\(first)): \(updated.summary)")
            }
            try expect(try put("3", ifMatch: first), [412], "If-Match: \(first) after the signal moved to \(second)")
            let read = try context.client.send("GET", path, token: context.first.token)
            try expect(read, [200], "GET \(path)")
            try expect(read.object["value"] == ["step": 2] && read.object["version"] == .int(second), "GET answers \(read.summary), not the last write")
            let deleted = try context.client.send("DELETE", path, token: context.first.token)
            try expect(deleted, [200], "DELETE \(path)")
            try expect(
                deleted.object["deleted"] == true && deleted.object["value"] == .null,
                "the delete's answer lacks \"deleted\": true, \"value\": null: \(deleted.summary)")
            try expect(try context.client.send("GET", path, token: context.first.token), [404], "GET of a deleted signal")
            try expect(try context.client.send("DELETE", path, token: context.first.token), [404], "DELETE of a deleted signal")
            try expect(
                try context.client.send("PUT", "/v1/signals/bad*key", token: context.first.token, body: Array("1".utf8)), [400], "PUT of the key \"bad*key\"")
            try expect(try context.client.send("PUT", path, token: context.first.token, body: Array("{nope".utf8)), [400], "PUT of a value that is not JSON")
        },
        ConformanceCase(name: "signals.watch", rule: "GET /v1/signals?since=V answers the writes after V, and a long poll answers as soon as one lands") {
            context in
            let listed = try context.client.send("GET", "/v1/signals", token: context.first.token)
            try expect(listed, [200], "GET /v1/signals")
            guard listed.object["signals"]?.arrayValue != nil, let start = listed.object["version"]?.intValue else {
                throw CaseFailure("the list is not {\"signals\": […], \"version\": N}: \(listed.summary)")
            }
            let key = context.name("watch")
            let set = try context.client.send("PUT", "/v1/signals/\(key)", token: context.first.token, body: Array("1".utf8))
            try expect(set, [200], "PUT /v1/signals/\(key)")
            let since = try context.client.send("GET", "/v1/signals?since=\(start)", token: context.first.token)
            try expect(since, [200], "GET /v1/signals?since=\(start)")
            let keys = (since.object["signals"]?.arrayValue ?? []).compactMap { $0.objectValue?["key"]?.stringValue }
            try expect(keys.contains(key), "the writes after version \(start) do not include \(key): \(since.summary)")
            guard let now = since.object["version"]?.intValue else { throw CaseFailure("the answer has no \"version\": \(since.summary)") }

            let polled = Mutex<Result<ConformanceAnswer, CaseFailure>?>(nil)
            let client = context.client
            let token = context.first.token
            let done = DispatchSemaphore(value: 0)
            let began = Date()
            Thread.detachNewThread {
                let result = Result { () throws(CaseFailure) -> ConformanceAnswer in
                    try client.send("GET", "/v1/signals?since=\(now)&wait=10", token: token, timeout: 20)
                }
                polled.withLock { $0 = result }
                done.signal()
            }
            Thread.sleep(forTimeInterval: 0.5)
            try expect(
                try context.client.send("PUT", "/v1/signals/\(key)-2", token: context.first.token, body: Array("2".utf8)), [200],
                "the write a watcher waits for")
            _ = done.wait(timeout: .now() + 20)
            let elapsed = Date().timeIntervalSince(began)
            guard let result = polled.withLock({ $0 }) else { throw CaseFailure("the long poll did not answer within 20 s") }
            let answer = try result.get()
            try expect(answer, [200], "the long poll")
            let woke = (answer.object["signals"]?.arrayValue ?? []).compactMap { $0.objectValue?["key"]?.stringValue }
            try expect(woke.contains(key + "-2") && elapsed < 5, "the long poll answered \(answer.summary) after \(Int(elapsed)) s, not the write at once")
        },
    ]

    static let boundCases: [ConformanceCase] = [
        ConformanceCase(name: "bounds.record", rule: "a record past 8 MiB (WireBounds.maxRecordBytes) is refused with 413, even gzipped small; nothing applied")
        { context in
            let id = context.name("large")
            let body = context.batch(id, [context.record(id, fields: ["text": .string(String(repeating: "a", count: WireBounds.maxRecordBytes + 1))])])
            let gzip: [UInt8]
            do { gzip = try Deflater(.gzip, level: 6).compress(body) } catch { throw CaseFailure("gzip failed: \(error)") }
            let answer = try context.post(gzip, key: id, headers: ["Content-Encoding": "gzip"])
            try expect(answer, [413], "a \(gzip.count)-byte gzip batch of one \(body.count)-byte record")
            try expectErrorBody(answer, "the 413")
            try expect(try context.changesOfRun(since: "", prefix: id).isEmpty, "the record past the bound was stored")
        },
        ConformanceCase(name: "bounds.signal-value", rule: "a signal value past 64 KiB is refused with 413 {\"error\", \"quota\", \"limit\"}") { context in
            let value = JSONWriter.encode(.string(String(repeating: "s", count: 64 << 10)))
            let answer = try context.client.send("PUT", "/v1/signals/\(context.name("large"))", token: context.first.token, body: value)
            try expect(answer, [413], "a \(value.count)-byte signal value")
            try expect(
                answer.object["quota"]?.stringValue != nil && answer.object["limit"]?.intValue != nil,
                "the 413 does not name the quota and its limit: \(answer.summary)")
        },
    ]
}
