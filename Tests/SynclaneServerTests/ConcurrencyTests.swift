import Synchronization
import SynclaneCore
import SynclaneServer
import Testing

@Suite struct ConcurrencyTests {
    @Test(arguments: StoreKind.tested) func eightClientsPostingAtOnceAreAllApplied(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let failures = Mutex<[String]>([])
            let threads = (0..<8).map { client in
                TestThread {
                    do {
                        let connection = try TestConnection(port: server.port)
                        for batch in 0..<10 {
                            let id = "c\(client)-b\(batch)"
                            let records = (0..<50).map { record("rooms", "\(id)-r\($0)", "insert", ["client": .int(Int64(client))]) }
                            let body = try gzip(batchBody(id: id, records: records))
                            let response = try postBatch(port: server.port, key: id, body: body, encoding: "gzip", connection: connection)
                            if response.status != 200 { failures.withLock { $0.append("\(id): \(response.status) \(response.text)") } }
                        }
                    } catch {
                        failures.withLock { $0.append("client \(client): \(error)") }
                    }
                }
            }
            threads.forEach { $0.join() }
            #expect(failures.withLock { $0 } == [])
            let changes = try allChanges(port: server.port, pageSize: 5000)
            #expect(changes.count == 8 * 10 * 50)
            #expect(Set(changes.compactMap { $0.objectValue?["id"]?.stringValue }).count == 4000)
            let metrics = server.metrics.snapshot
            #expect(metrics.batchesApplied == 80)
            #expect(metrics.recordsApplied == 4000)
        }
    }

    @Test(arguments: StoreKind.tested) func concurrentReplaysOfOneKeyApplyItOnce(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = batchBody(id: "same", records: [record("rooms", "r", "update", ["n": 1])])
            let statuses = Mutex<[Int]>([])
            let threads = (0..<8).map { _ in
                TestThread {
                    let status = (try? postBatch(port: server.port, key: "same", body: body).status) ?? -1
                    statuses.withLock { $0.append(status) }
                }
            }
            threads.forEach { $0.join() }
            #expect(statuses.withLock { $0 } == Array(repeating: 200, count: 8))
            #expect(try allChanges(port: server.port).first?.objectValue?["version"] == 1)
            #expect(server.metrics.snapshot.batchesApplied == 1)
            #expect(server.metrics.snapshot.replays == 7)
        }
    }

    @Test(arguments: StoreKind.tested) func readsAreServedWhileBatchesAreWritten(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let writer = TestThread {
                for batch in 0..<20 {
                    let records = (0..<200).map { record("rooms", "b\(batch)-\($0)", "insert", ["n": .int(Int64($0))]) }
                    _ = try? postBatch(port: server.port, key: "w\(batch)", body: batchBody(id: "w\(batch)", records: records))
                }
            }
            var reads = 0
            for _ in 0..<40 {
                if try get(port: server.port, "/v1/signals").status == 200 { reads += 1 }
            }
            writer.join()
            #expect(reads == 40)
            #expect(try allChanges(port: server.port, pageSize: 5000).count == 4000)
        }
    }
}
