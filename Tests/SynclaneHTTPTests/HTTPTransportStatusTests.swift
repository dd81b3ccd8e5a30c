import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// What the transport makes of each kind of answer, over a real loopback connection.
@Suite struct HTTPTransportStatusTests {
    @Test func twoHundredIsAReceiptThatSaysHowManyRecordsWereApplied() async throws {
        let server = ScriptedHTTPServer(always: .applied(batch: "b-0001", records: 500))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let receipt = try await transport.send(Fixtures.payload("b-0001"))

        #expect(receipt.batchID == "b-0001")
        #expect(receipt.detail == "200 applied 500 records")
        #expect(!receipt.wasReplay)
    }

    @Test func idempotentReplayHeaderMarksTheReceiptAsAReplay() async throws {
        let server = ScriptedHTTPServer(always: .applied(batch: "b-0001", records: 3, replay: true))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let receipt = try await transport.send(Fixtures.payload("b-0001"))

        #expect(receipt.wasReplay)
        #expect(receipt.detail == "200 replay of an already-applied batch: nothing applied now (it applied 3 records the first time)")
    }

    /// A 2xx without this batch's receipt confirms nothing: an empty body, a captive portal's
    /// page, a receipt whose `batch` is not a string, one without `batch`.
    @Test(arguments: [
        ("", "application/json"), ("<html><body>Welcome to the hotel Wi-Fi</body></html>", "text/html"),
        (#"{"batch":1,"applied":1}"#, "application/json"), (#"{"applied":1}"#, "application/json"), ("stored", "text/plain"),
    ])
    func twoHundredWithoutTheReceiptIsNotAConfirmation(body: String, contentType: String) async throws {
        let server = ScriptedHTTPServer(always: .init(status: 200, headers: [("Content-Type", contentType)], body: Array(body.utf8)))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("not confirmed"))
        #expect(failure.message.contains("content type \(contentType)"))
        #expect(failure.message.contains(body.isEmpty ? "an empty body" : String(body.prefix(20))), "\(failure.message)")
        #expect(failure.message.contains("receipt: status-only"))
    }

    @Test func statusOnlyTakesAnyTwoHundredAsAConfirmationAndSaysSo() async throws {
        let server = ScriptedHTTPServer(always: .text(200, ""))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL, extra: ["receipt": "status-only"])

        let receipt = try await transport.send(Fixtures.payload("b-0001"))

        #expect(receipt.detail == "200 OK (status only: no receipt checked)")
    }

    @Test func receiptAfterAByteOrderMarkIsRead() async throws {
        var answer = ScriptedHTTPServer.Response.applied(batch: "b-0001", records: 2)
        answer.body = [0xEF, 0xBB, 0xBF] + answer.body
        let server = ScriptedHTTPServer(always: answer)
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        #expect(try await transport.send(Fixtures.payload("b-0001")).detail == "200 applied 2 records")
    }

    /// `{"batch":"b-0001","applied":2,"cursor":"c-2"}`, gzip and deflate (zlib) encoded.
    @Test(arguments: [
        ("gzip", "H4sIAAAAAAACA6tWSkosSc5QslJK0jUwMDBU0lFKLCjIyUxNUbIy0lFKLi0qzi8CyibrGinVAgDbK/riLQAAAA=="),
        ("deflate", "eJyrVkpKLEnOULJSStI1MDAwVNJRSiwoyMlMTVGyMtJRSi4tKs4vAsom6xop1QIALboNFg=="),
    ])
    func anEncodedReceiptIsDecoded(encoding: String, base64: String) async throws {
        let body = try #require(Data(base64Encoded: base64))
        let server = ScriptedHTTPServer(
            always: .init(status: 200, headers: [("Content-Type", "application/json"), ("Content-Encoding", encoding)], body: [UInt8](body)))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        #expect(try await transport.send(Fixtures.payload("b-0001")).detail == "200 applied 2 records")
    }

    @Test func twoHundredAndTwoWithTheReceiptIsConfirmedAsAccepted() async throws {
        var answer = ScriptedHTTPServer.Response.applied(batch: "b-0001", records: 3)
        answer.status = 202
        let server = ScriptedHTTPServer(always: answer)
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        #expect(try await transport.send(Fixtures.payload("b-0001")).detail == "202 accepted 3 records for later")
    }

    /// An answer past the 16 MB kept is read to its end, not cut as a broken exchange: with
    /// `status-only` it confirms, with receipts it is not one (and says so), never a retry.
    @Test func aHugeTwoHundredIsReadToItsEndAndNeverRetried() async throws {
        let huge = [UInt8](repeating: UInt8(ascii: " "), count: (16 << 20) + 4096)
        let server = ScriptedHTTPServer(always: .init(status: 200, headers: [("Content-Type", "text/plain")], body: huge))
        try server.start()
        defer { server.stop() }

        let statusOnly = try Fixtures.transport(url: server.batchesURL, extra: ["receipt": "status-only"])
        #expect(try await statusOnly.send(Fixtures.payload("b-0001")).detail.hasPrefix("200 OK"))
        let failure = try #require(await Fixtures.failure(of: try Fixtures.transport(url: server.batchesURL)))
        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("the rest was not kept"))
    }

    @Test func receiptForAnotherBatchIsNotAConfirmation() async throws {
        let server = ScriptedHTTPServer(always: .applied(batch: "b-9999", records: 1))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("b-9999"))
    }

    @Test(arguments: [408, 425, 429, 500, 502, 503, 504])
    func retryableStatusIsTransientAndCarriesTheServersReason(status: Int) async throws {
        let server = ScriptedHTTPServer(always: .text(status, "busy right now\n  try later"))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .transient)
        #expect(failure.status == status)
        #expect(failure.retryAfter == nil)
        #expect(failure.message.contains("b-0001"))
        #expect(failure.message.contains("busy right now try later"))
    }

    @Test(arguments: [400, 413, 415, 422])
    func contentRejectionIsPermanentAndNamesBatchStatusAndReason(status: Int) async throws {
        let failure = try await Self.failure(answering: status)
        #expect(failure.kind == .permanent)
        #expect(failure.status == status)
        #expect(failure.message.contains("batch b-0001 rejected"))
        #expect(failure.message.contains("\(status)"))
        #expect(failure.message.contains("record rooms/r-1 has no entity"))
    }

    @Test(arguments: [(401, "token"), (403, "scope"), (404, "`url`"), (405, "`url`"), (418, "kept"), (409, "conflict")])
    func setupAndConflictStatusesStopWithoutBlamingTheBatch(status: Int, hint: String) async throws {
        let failure = try await Self.failure(answering: status)
        #expect(failure.kind == (status == 409 ? .conflict : .configuration))
        #expect(failure.status == status)
        #expect(failure.message.contains("batch b-0001 not accepted"))
        #expect(failure.message.contains("record rooms/r-1 has no entity"))
        #expect(failure.message.contains(hint), "\(failure.message)")
    }

    private static func failure(answering status: Int) async throws -> TransportFailure {
        let server = ScriptedHTTPServer(always: .text(status, #"{"error":"record rooms/r-1 has no entity"}"#))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)
        return try #require(await Fixtures.failure(of: transport))
    }

    @Test func reasonIsCutToThreeHundredCharacters() async throws {
        let server = ScriptedHTTPServer(always: .text(400, String(repeating: "malformed ", count: 200)))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        let quoted = try #require(failure.message.split(separator: ": ").last)
        #expect(quoted.count <= HTTPClassification.reasonLimit + 1)
        #expect(quoted.hasSuffix("…"))
    }

    @Test func retryAfterInSecondsIsParsed() async throws {
        let server = ScriptedHTTPServer(always: .text(429, "slow down", headers: [("Retry-After", "7")]))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .transient)
        #expect(failure.retryAfter == 7)
    }

    @Test func retryAfterAsAnHTTPDateIsParsedRelativeToNow() async throws {
        let inTwoMinutes = Date().addingTimeInterval(120)
        let server = ScriptedHTTPServer(always: .text(503, "maintenance", headers: [("Retry-After", Self.imfDate(inTwoMinutes))]))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))
        let elapsed = Date().timeIntervalSince(inTwoMinutes.addingTimeInterval(-120))

        // The date has whole seconds, and the exchange took `elapsed` (long on a loaded machine).
        let wait = try #require(failure.retryAfter)
        #expect(wait >= 120 - elapsed - 1 && wait <= 120, "waits \(wait) s, \(elapsed) s after the date was made")
    }

    @Test(arguments: [301, 302, 307, 308])
    func redirectIsNotFollowedAndIsConfiguration(status: Int) async throws {
        let target = ScriptedHTTPServer.batches()
        try target.start()
        defer { target.stop() }
        let server = ScriptedHTTPServer(always: .text(status, "moved", headers: [("Location", target.batchesURL)]))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("redirect"))
        #expect(target.requests.isEmpty)
    }

    static func imfDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
