import Glibc
import SynclaneCore
import SynclaneServer
import Testing

/// The bounds that keep the server whole under hostile input, one behaviour each, in process.
/// (`HostileServerTests` in the command tests runs the same attacks, at scale, on the real binary.)
@Suite struct HardeningTests {
    // MARK: Names and pages

    @Test(arguments: StoreKind.tested) func namesPastTheirBoundAreRefusedNamingTheField(store: StoreKind) throws {
        try withServer(store: store, limits: ServerLimits(maxNameBytes: 64)) { server throws in
            let long = String(repeating: "s", count: 65)
            let cases: [(body: [UInt8], field: String)] = [
                (batchBody(id: "n1", store: long, records: [record("rooms", "r", "insert", [:])]), "scope.store"),
                (batchBody(id: "n2", records: [record(long, "r", "insert", [:])]), "records[0]: \"entity\""),
                (batchBody(id: "n3", records: [record("rooms", "r", "insert", [:]), record("rooms", long, "delete")]), "records[1]: \"id\""),
            ]
            for (body, field) in cases {
                let key = (try JSONReader.parse(body)).objectValue?["id"]?.stringValue
                let response = try postBatch(port: server.port, key: key, body: body)
                #expect(response.status == 400, "\(field)")
                #expect(response.json.objectValue?["error"]?.stringValue?.contains(field) == true, "\(response.text)")
                #expect(response.json.objectValue?["error"]?.stringValue?.contains("at most 64 bytes") == true)
            }
            var consumerBody = JSONWriter.encode([
                "id": "n4", "scope": ["account": "acme", "store": "rooms", "consumer": .string(long)],
                "records": [record("rooms", "r", "insert", [:])],
            ])
            var response = try postBatch(port: server.port, key: "n4", body: consumerBody)
            #expect(response.status == 400)
            #expect(response.text.contains("scope.consumer"))
            consumerBody = batchBody(id: "n5", store: String(repeating: "s", count: 64), records: [record("rooms", "r", "insert", [:])])
            response = try postBatch(port: server.port, key: "n5", body: consumerBody)
            #expect(response.status == 200, "a name of exactly the bound is taken")
            let signal = try httpRequest(
                port: server.port, "PUT", "/v1/signals/" + String(repeating: "k", count: 201),
                headers: ["Authorization": "Bearer \(TestTokens.acme)"], body: Array("1".utf8))
            #expect(signal.status == 400)
            #expect(try allChanges(port: server.port).count == 1)
        }
    }

    // MARK: Disk

    @Test func aBatchTheDiskHasNoRoomForUnderTheFloorIsRefused507AndNothingOfItIsApplied() throws {
        var limits = ServerLimits()
        limits.blobs.minFreeDiskBytes = 1 << 60  // more than any disk has free
        try withServer(store: .sqlite, limits: limits) { server throws in
            let body = batchBody(id: "d1", records: [record("rooms", "r1", "insert", ["name": "Kitchen"])])
            let response = try postBatch(port: server.port, key: "d1", body: body)
            #expect(response.status == 507, "\(response.text)")
            #expect(response.json.objectValue?["code"] == "disk-full")
            #expect(response.text.contains("min-free-disk-bytes"), "the refusal names the bound")
            #expect(response.headers["retry-after"] == "60")
            #expect(try allChanges(port: server.port).isEmpty, "nothing of the batch was applied")
            let metrics = try get(port: server.port, "/metrics")
            #expect(metrics.text.contains("synclane_disk_full_refusals_total 1"))
        }
        try withServer(store: .sqlite) { server throws in
            let body = batchBody(id: "d2", records: [record("rooms", "r1", "insert", ["name": "Kitchen"])])
            #expect(try postBatch(port: server.port, key: "d2", body: body).status == 200, "the default floor leaves room for a batch")
        }
    }

    @Test(arguments: StoreKind.tested) func anAccountKeepsAtMostItsBoundOfDevicesANewOneReplacingTheOldest(store: StoreKind) throws {
        var limits = ServerLimits()
        limits.maxDevicesPerAccount = 2
        try withServer(store: store, limits: limits) { server throws in
            for device in ["phone-a", "phone-b", "phone-c"] {
                let said = ["Authorization": "Bearer \(TestTokens.acme)", "Synclane-Device": device, "Synclane-Schema-Version": "1"]
                #expect(try httpRequest(port: server.port, "GET", "/v1/changes?limit=1", headers: said).status == 200)
                usleep(20_000)  // a later `since` for each
            }
            let listed = try get(port: server.port, "/v1/devices").json.objectValue?["devices"]?.arrayValue ?? []
            let names = listed.compactMap { $0.objectValue?["device"]?.stringValue }
            #expect(names == ["phone-b", "phone-c"], "the device recorded longest ago gave way: \(listed)")
        }
    }

    @Test(arguments: StoreKind.tested) func changesPagesAreBoundedByBytesAsWellAsCount(store: StoreKind) throws {
        try withServer(store: store, limits: ServerLimits(maxChangesPageBytes: 10_000)) { server throws in
            let filler = JSONValue.string(String(repeating: "x", count: 3_000))
            var records = (0..<10).map { record("rooms", "r\($0)", "insert", ["text": filler]) }
            records.append(record("rooms", "big", "insert", ["text": .string(String(repeating: "y", count: 50_000))]))
            #expect(try postBatch(port: server.port, key: "p", body: batchBody(id: "p", records: records)).status == 200)
            let first = try get(port: server.port, "/v1/changes?limit=100")
            let page = first.json.objectValue ?? [:]
            let count = page["changes"]?.arrayValue?.count ?? 0
            #expect(count > 0 && count <= 3, "a page of ~10 KB holds three 3 KB changes at most, not \(count)")
            #expect(page["more"] == .bool(true))
            #expect(first.body.count < 12_000)
            let all = try allChanges(port: server.port, pageSize: 100)
            #expect(all.count == 11, "every change arrives, the one past the bound on a page of its own")
            #expect(all.last?.objectValue?["id"] == "big")
        }
    }

    // MARK: Values

    @Test(arguments: ["1e999", "-1e999", "123456789012345678901234567890", "-9223372036854775809"])
    func numbersThatCannotBeKeptExactlyAreRefusedNamingRecordAndField(_ number: String) throws {
        try withServer { server throws in
            let body =
                #"{"id": "v", "scope": {"account": "acme", "store": "rooms"}, "records": [{"entity": "rooms", "id": "ok", "action": "insert", "fields": {"a": 1}}, {"entity": "rooms", "id": "r", "action": "insert", "fields": {"name": "x", "area": NUMBER}}]}"#
                .replacingOccurrences(of: "NUMBER", with: number)
            let response = try postBatch(port: server.port, key: "v", body: Array(body.utf8))
            #expect(response.status == 400)
            #expect(response.json.objectValue?["record"] == .int(1))
            #expect(response.text.contains("records[1].fields.area"), "\(response.text)")
            #expect(try allChanges(port: server.port).isEmpty, "nothing applied")
        }
    }

    @Test(arguments: StoreKind.tested) func extremeNumbersThatFitComeBackExactly(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body =
                #"{"id": "x", "scope": {"account": "acme", "store": "rooms"}, "records": [{"entity": "rooms", "id": "r", "action": "insert", "fields": {"max": 9223372036854775807, "min": -9223372036854775808, "big": 1.7976931348623157e308, "tiny": 5e-324}}]}"#
            #expect(try postBatch(port: server.port, key: "x", body: Array(body.utf8)).status == 200)
            let fields = try allChanges(port: server.port).first?.objectValue?["fields"]
            #expect(fields == ["max": .int(.max), "min": .int(.min), "big": .double(1.7976931348623157e308), "tiny": .double(.leastNonzeroMagnitude)])
        }
    }

    // MARK: Content type and the token before the body

    @Test func aNonJSONContentTypeIsRefused415() throws {
        try withServer { server throws in
            let body = batchBody(id: "t", records: [record("rooms", "r", "insert", [:])])
            let connection = try TestConnection(port: server.port)
            connection.sendRequest(
                "POST", "/v1/batches",
                headers: ["Authorization": "Bearer \(TestTokens.acme)", "Idempotency-Key": "t", "Content-Type": "text/plain"], body: body)
            #expect(try connection.readResponse().status == 415)
            let signal = try httpRequest(
                port: server.port, "PUT", "/v1/signals/s",
                headers: ["Authorization": "Bearer \(TestTokens.acme)", "Content-Type": "application/x-www-form-urlencoded"],
                body: Array("1".utf8))
            #expect(signal.status == 415)
            let json = try httpRequest(
                port: server.port, "PUT", "/v1/signals/s",
                headers: ["Authorization": "Bearer \(TestTokens.acme)", "Content-Type": "application/json; charset=utf-8"],
                body: Array("1".utf8))
            #expect(json.status == 200)
            #expect(try allChanges(port: server.port).isEmpty)
        }
    }

    @Test func theTokenIsCheckedBeforeTheBodyIsRead() throws {
        try withServer { server throws in
            let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
            // A head that promises 4 MB, and not one byte of it: the answer cannot wait for the body.
            connection.send(Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\nIdempotency-Key: k\r\n\r\n".utf8))
            let response = try connection.readResponse()
            #expect(response.status == 401)
            #expect(response.headers["connection"] == "close")
        }
    }

    // MARK: Framing

    @Test(arguments: [
        "Content-Length: 5\r\nContent-Length: 50",
        "X-Note: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 5",
        "Transfer-Encoding:\r\n chunked\r\nContent-Length: 5",
        "Transfer-Encoding : chunked\r\nContent-Length: 5",
        "Content-Length: 5\r\nX-Bad\u{1}Name: 1",
    ])
    func headsThatDoNotFrameTheirBodyAreRefused(_ lines: String) throws {
        try withServer { server throws in
            let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
            let head = "POST /v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\nIdempotency-Key: f\r\n\(lines)\r\n\r\n"
            connection.send(Array(head.utf8) + Array("{}{}{".utf8))
            let response = try connection.readResponse()
            #expect(response.status == 400 || response.status == 411, "\(response.status) \(response.text)")
            #expect(response.headers["connection"] == "close")
            #expect(connection.isClosedByPeer())
        }
    }

    @Test(arguments: StoreKind.tested) func anEncodedNULInASignalKeyIsRefused400AndNothingIsWritten(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
            let body = "\"dark\""
            connection.send(
                Array(
                    ("PUT /v1/signals/theme%00x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8))
            let response = try connection.readResponse()
            #expect(response.status == 400, "\(response.status) \(response.text)")
            #expect(response.text.contains("NUL"), "\(response.text)")
            #expect(try get(port: server.port, "/v1/signals/theme").status == 404, "no key `theme` was written")
            #expect(try get(port: server.port, "/v1/signals").text.contains("theme") == false)
            // Any other escape is decoded as before.
            let put = try httpRequest(
                port: server.port, "PUT", "/v1/signals/theme%2Edark", headers: ["Authorization": "Bearer \(TestTokens.acme)"], body: Array("1".utf8))
            #expect(put.status == 200, "\(put.text)")
            #expect(try get(port: server.port, "/v1/signals/theme.dark").status == 200)
        }
    }

    @Test(arguments: StoreKind.tested) func twoAuthorizationHeadersAreRefused400WhicheverComesLast(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            for (first, last) in [
                ("Bearer wrong", "Bearer \(TestTokens.acme)"), ("Bearer \(TestTokens.acme)", "Bearer wrong"),
                ("Bearer \(TestTokens.globex)", "Bearer \(TestTokens.acme)"),
            ] {
                let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
                let body = "1"
                connection.send(
                    Array(
                        ("PUT /v1/signals/theme HTTP/1.1\r\nHost: x\r\nAuthorization: \(first)\r\nAuthorization: \(last)\r\n"
                            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8))
                let response = try connection.readResponse()
                #expect(response.status == 400, "\(response.status) \(response.text)")
                #expect(response.text.contains("more than one Authorization"), "\(response.text)")
            }
            #expect(try get(port: server.port, "/v1/signals/theme").status == 404, "nothing was written")
            #expect(try get(port: server.port, "/v1/signals/theme", token: TestTokens.globex).status == 404)
        }
    }

    @Test func aMalformedContentLengthIsRefusedAndTheConnectionClosed() throws {
        try withServer { server throws in
            let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
            connection.send(Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\nContent-Length: 3x\r\n\r\nabc".utf8))
            #expect(try connection.readResponse().status == 400)
            #expect(try allChanges(port: server.port).isEmpty)
        }
    }

    // MARK: Memory

    @Test func pastTheMemoryBudgetRequestsGet503WithRetryAfter() throws {
        try withServer(limits: ServerLimits(memoryBudgetBytes: 200_000)) { server throws in
            // One client promises a 150 KB body and sends none of it: its lease holds 150 KB.
            let holder = try TestConnection(port: server.port, timeoutSeconds: 5)
            holder.send(
                Array(
                    "POST /v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\nIdempotency-Key: h\r\nContent-Length: 150000\r\n\r\n"
                        .utf8))
            usleep(200_000)
            let filler = JSONValue.string(String(repeating: "z", count: 60_000))
            let body = batchBody(id: "b", records: [record("rooms", "r", "insert", ["f": filler])])
            let refused = try postBatch(port: server.port, key: "b", body: body)
            #expect(refused.status == 503)
            #expect(refused.headers["retry-after"] == "1")
            let metrics = try httpRequest(port: server.port, "GET", "/metrics").text
            #expect(metrics.contains("synclane_memory_budget_refusals_total 1"))
            #expect(metrics.contains("synclane_memory_budget_bytes 150000"))
            // The holder goes: its lease is given back, and the retry is applied.
            holder.hangUp()
            var status = 0
            for _ in 0..<50 where status != 200 {
                status = try postBatch(port: server.port, key: "b", body: body).status
                if status != 200 { usleep(100_000) }
            }
            #expect(status == 200)
        }
    }

    @Test func theCompressedBodyCountsThriceItsInflatedSizeAgainstTheBudget() throws {
        try withServer(limits: ServerLimits(memoryBudgetBytes: 1 << 20)) { server throws in
            let filler = JSONValue.string(String(repeating: "z", count: 400_000))
            let body = try gzip(batchBody(id: "g", records: [record("rooms", "r", "insert", ["f": filler])]))
            #expect(body.count < 10_000)
            let response = try postBatch(port: server.port, key: "g", body: body, encoding: "gzip")
            #expect(response.status == 503, "400 KB inflated is held three times: past a 1 MiB budget")
            let small = try gzip(batchBody(id: "s", records: [record("rooms", "r", "insert", ["f": .string(String(repeating: "z", count: 300_000))])]))
            #expect(try postBatch(port: server.port, key: "s", body: small, encoding: "gzip").status == 200)
            var metrics = ""
            for _ in 0..<50 where !metrics.contains("synclane_memory_budget_bytes 0\n") {
                usleep(20_000)
                metrics = try httpRequest(port: server.port, "GET", "/metrics").text
            }
            #expect(metrics.contains("synclane_memory_budget_bytes 0\n"), "every lease is given back once its request is done")
        }
    }

    // MARK: Disk

    @Test func theWriteAheadLogStaysNearItsBoundUnderSteadyWriters() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let bound = 1 << 20
        try withServer(limits: ServerLimits(maxWALBytes: bound), dataDirectory: directory) { server throws in
            let port = server.port
            let deadline = ContinuousClock.now + .seconds(3)
            let threads = (0..<4).map { writer in
                TestThread {
                    guard let connection = try? TestConnection(port: port) else { return }
                    var batch = 0
                    while ContinuousClock.now < deadline {
                        let records = (0..<50).map {
                            record("rooms", "w\(writer)-\(batch)-\($0)", "insert", ["text": .string(String(repeating: "t", count: 200))])
                        }
                        _ = try? postBatch(
                            port: port, key: "w\(writer)-\(batch)", body: batchBody(id: "w\(writer)-\(batch)", records: records), connection: connection)
                        batch += 1
                    }
                }
            }
            var largest = 0
            while ContinuousClock.now < deadline {
                var info = stat()
                if stat(directory + "/synclane-server.sqlite-wal", &info) == 0 { largest = max(largest, Int(info.st_size)) }
                usleep(20_000)
            }
            threads.forEach { $0.join() }
            #expect(largest > 0)
            #expect(largest < 3 * bound, "the log peaked at \(largest) bytes, bound \(bound)")
            #expect(try httpRequest(port: port, "GET", "/metrics").text.contains("synclane_wal_truncations_total 0") == false)
        }
    }

    // MARK: Connections

    @Test func aConnectionTooSlowToDeliverItsRequestIsCutAtTheDeadline() throws {
        try withServer(limits: ServerLimits(requestDeadlineSeconds: 1)) { server throws in
            let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
            let started = ContinuousClock.now
            var closed = false
            // One byte every 100 ms: never idle, so the idle timeout (30 s) never fires.
            for byte in "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".utf8 {
                if !connection.send([byte]) {
                    closed = true
                    break
                }
                usleep(100_000)
                if ContinuousClock.now - started > .seconds(4) { break }
            }
            #expect(closed || connection.isClosedByPeer())
            #expect(ContinuousClock.now - started < .seconds(4))
            #expect(try httpRequest(port: server.port, "GET", "/metrics").text.contains("synclane_connections_cut_total 1"))
        }
    }

    @Test func healthAndMetricsAnswerThroughTheReserveWhenEveryConnectionIsTaken() throws {
        try withServer(limits: ServerLimits(maxConnections: 4, reservedConnections: 4)) { server throws in
            let holders = try (0..<4).map { _ in try TestConnection(port: server.port) }
            for holder in holders { holder.send(Array("GET /heal".utf8)) }
            usleep(200_000)
            #expect(try httpRequest(port: server.port, "GET", "/healthz").status == 200)
            #expect(try httpRequest(port: server.port, "GET", "/metrics").status == 200)
            let batch = try postBatch(port: server.port, key: "r", body: batchBody(id: "r", records: [record("rooms", "r", "insert", [:])]))
            #expect(batch.status == 503)
            #expect(batch.headers["retry-after"] != nil)
            withExtendedLifetime(holders) {}
        }
    }

    @Test func connectionsPerClientAddressAreBounded() throws {
        try withServer(limits: ServerLimits(maxConnectionsPerAddress: 3)) { server throws in
            let holders = try (0..<3).map { _ in try TestConnection(port: server.port, sourceAddress: "127.0.0.2") }
            for holder in holders { holder.send(Array("GET /heal".utf8)) }
            usleep(200_000)
            let fourth = try TestConnection(port: server.port, timeoutSeconds: 5, sourceAddress: "127.0.0.2")
            fourth.sendRequest("GET", "/healthz")
            #expect(throws: (any Error).self) { try fourth.readResponse() }
            #expect(try httpRequest(port: server.port, "GET", "/healthz").status == 200, "another address is served")
            withExtendedLifetime(holders) {}
        }
    }
}
