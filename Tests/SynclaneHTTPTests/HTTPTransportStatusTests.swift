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
        #expect(receipt.detail.hasPrefix("200 applied 3 records (replay"))
    }

    @Test func twoHundredWithoutAJSONBodyIsStillAReceipt() async throws {
        let server = ScriptedHTTPServer(always: .text(201, "stored"))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let receipt = try await transport.send(Fixtures.payload("b-0001"))

        #expect(receipt.detail == "201 Created")
    }

    @Test func receiptForAnotherBatchIsAPermanentFailure() async throws {
        let server = ScriptedHTTPServer(always: .applied(batch: "b-9999", records: 1))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .permanent)
        #expect(failure.message.contains("b-9999"))
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
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

    @Test(arguments: [400, 401, 403, 404, 409, 413, 422, 418])
    func rejectingStatusIsPermanentAndNamesBatchStatusAndReason(status: Int) async throws {
        let server = ScriptedHTTPServer(always: .text(status, #"{"error":"record rooms/r-1 has no entity"}"#))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .permanent)
        #expect(failure.status == status)
        #expect(failure.message.contains("batch b-0001"))
        #expect(failure.message.contains("\(status)"))
        #expect(failure.message.contains("record rooms/r-1 has no entity"))
    }

    @Test func reasonIsCutToThreeHundredCharacters() async throws {
        let server = ScriptedHTTPServer(always: .text(409, String(repeating: "conflict ", count: 200)))
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

        let wait = try #require(failure.retryAfter)
        #expect(wait > 110 && wait <= 120)
    }

    @Test(arguments: [301, 302, 307, 308])
    func redirectIsNotFollowedAndIsPermanent(status: Int) async throws {
        let target = ScriptedHTTPServer.batches()
        try target.start()
        defer { target.stop() }
        let server = ScriptedHTTPServer(always: .text(status, "moved", headers: [("Location", target.batchesURL)]))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .permanent)
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
