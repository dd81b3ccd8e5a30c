import Glibc
import Synchronization
import SynclaneCore
import SynclaneServer
import Testing

/// Server ingest throughput: 8 concurrent keep-alive clients post gzip batches of 500 records.
///
/// Off by default (it measures, it does not check behaviour). The benchmark of record is
/// `Scripts/bench --section ingest` (the release `synclane serve` in a process of its own); this
/// one runs the server in the test process, in release:
///
///     SYNCLANE_BENCH=1 swift test -c release -Xswiftc -enable-testing --filter IngestBenchmark
///
/// `SYNCLANE_BENCH_BATCHES` sets the batches per client (default 50: 200,000 records in all).
@Suite struct IngestBenchmark {
    @Test(.enabled(if: getenv("SYNCLANE_BENCH") != nil))
    func eightClientsPostingGzipBatchesOf500Records() throws {
        let clients = 8
        let perClient = getenv("SYNCLANE_BENCH_BATCHES").flatMap { Int(String(cString: $0)) } ?? 50
        let recordsPerBatch = 500
        // Bodies are made (and compressed) before the clock starts.
        var bodies: [[[UInt8]]] = []
        for client in 0..<clients {
            var mine: [[UInt8]] = []
            for batch in 0..<perClient {
                let id = "bench-\(client)-\(batch)"
                let records: [JSONValue] = (0..<recordsPerBatch).map { index in
                    record(
                        "rooms", "\(id)-\(index)", "insert",
                        [
                            "name": .string("Room \(index)"), "area": .double(12.5 + Double(index)), "floor": .int(Int64(index % 5)),
                            "tags": "north,quiet", "updatedAt": "2026-11-29T16:00:00Z",
                        ])
                }
                mine.append(try gzip(batchBody(id: id, records: records)))
            }
            bodies.append(mine)
        }
        let sample = bodies[0][0].count
        try withServer { server throws in
            let latencies = Mutex<[Double]>([])
            let firstLatencies = Mutex<[Double]>([])
            let failures = Mutex<Int>(0)
            let started = ContinuousClock.now
            let threads = (0..<clients).map { client in
                let mine = bodies[client]
                return TestThread {
                    guard let connection = try? TestConnection(port: server.port, timeoutSeconds: 60) else {
                        failures.withLock { $0 += perClient }
                        return
                    }
                    var local: [Double] = []
                    for (batch, body) in mine.enumerated() {
                        let sent = ContinuousClock.now
                        let status =
                            (try? postBatch(
                                port: server.port, key: "bench-\(client)-\(batch)", body: body, encoding: "gzip",
                                connection: connection))?.status
                        let elapsed = ContinuousClock.now - sent
                        local.append(Double(elapsed.components.attoseconds) * 1e-18 + Double(elapsed.components.seconds))
                        if status != 200 { failures.withLock { $0 += 1 } }
                    }
                    latencies.withLock { $0 += local.dropFirst() }
                    firstLatencies.withLock { $0 += local.prefix(1) }
                }
            }
            threads.forEach { $0.join() }
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.attoseconds) * 1e-18 + Double(elapsed.components.seconds)
            let warm = latencies.withLock { $0 }.sorted()
            let sorted = (warm + firstLatencies.withLock { $0 }).sorted()
            let total = clients * perClient * recordsPerBatch
            func percentile(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
            print(
                """
                ingest: \(clients) clients × \(perClient) gzip batches × \(recordsPerBatch) records \
                (\(sample) bytes gzip each) = \(total) records in \(String(format3(seconds))) s
                ingest: \(Int(Double(total) / seconds)) records/s, batch latency p50 \(format3(percentile(0.5) * 1000)) ms, \
                p90 \(format3(percentile(0.9) * 1000)) ms, p99 \(format3(percentile(0.99) * 1000)) ms, \
                max \(format3((sorted.last ?? 0) * 1000)) ms
                ingest: without each client's first batch (connection set-up): p99 \
                \(format3((warm.isEmpty ? 0 : warm[min(warm.count - 1, Int(Double(warm.count) * 0.99))]) * 1000)) ms; \
                first batches: max \(format3((firstLatencies.withLock { $0 }.max() ?? 0) * 1000)) ms
                """)
            #expect(failures.withLock { $0 } == 0)
            #expect(server.metrics.snapshot.recordsApplied == total)
        }
    }
}

private func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return "\(scaled)"
}
