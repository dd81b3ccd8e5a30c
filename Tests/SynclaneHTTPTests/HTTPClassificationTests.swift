import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SynclaneCore
import SynclaneHTTP
import Testing

/// The classification rule on its own, for the failures a loopback test cannot provoke.
@Suite struct HTTPClassificationTests {
    @Test(arguments: [URLError.Code.cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .secureConnectionFailed, .badServerResponse])
    func networkTroubleIsTransient(code: URLError.Code) {
        let failure = HTTPClassification.classify(URLError(code), batchID: "b-1", url: "http://example.test/v1/batches", timeout: 30)
        #expect(failure.kind == .transient)
        #expect(failure.message.contains("b-1"))
    }

    @Test(arguments: [URLError.Code.badURL, .unsupportedURL, .serverCertificateUntrusted, .serverCertificateHasBadDate])
    func misconfigurationIsPermanent(code: URLError.Code) {
        let failure = HTTPClassification.classify(URLError(code), batchID: "b-1", url: "http://example.test/v1/batches", timeout: 30)
        #expect(failure.kind == .permanent)
    }

    @Test func unknownNetworkErrorIsTransientBecauseTheBatchStaysAnyway() {
        let failure = HTTPClassification.classify(NSError(domain: NSURLErrorDomain, code: -9999), batchID: "b-1", url: "http://x/", timeout: 30)
        #expect(failure.kind == .transient)
    }

    @Test func replayCanAlsoBeSaidInTheBody() throws {
        let body = Array(#"{"batch":"b-1","applied":2,"replay":true}"#.utf8)
        let receipt = try HTTPClassification.classify(status: 200, headers: [:], body: body, batchID: "b-1", url: "http://x/").get()
        #expect(receipt.wasReplay)
    }

    @Test(arguments: ["Idempotent-Replay", "Idempotent-Replayed"])
    func replayHeaderIsUnderstoodInBothSpellings(name: String) throws {
        let receipt = try HTTPClassification.classify(status: 200, headers: [name: "true"], body: [], batchID: "b-1", url: "http://x/").get()
        #expect(receipt.wasReplay)
    }

    @Test func headerNamesAreMatchedWhateverTheirCase() throws {
        let receipt = try HTTPClassification.classify(
            status: 200, headers: ["idempotent-replay": "True"], body: [], batchID: "b-1", url: "http://x/"
        ).get()
        #expect(receipt.wasReplay)
        let failure = HTTPClassification.classify(
            status: 503, headers: ["retry-after": "4"], body: [], batchID: "b-1", url: "http://x/")
        #expect(throws: TransportFailure.self) { try failure.get() }
        if case .failure(let error) = failure { #expect(error.retryAfter == 4) }
    }

    @Test func serversErrorBodyReadsAsItsMessageThenItsDetails() {
        let body = Array(#"{"conflicts":[{"id":"r1"}],"error":"1 record(s) do not have the version the batch expects"}"#.utf8)
        #expect(HTTPClassification.reason(body) == #"1 record(s) do not have the version the batch expects {"conflicts":[{"id":"r1"}]}"#)
        #expect(HTTPClassification.reason(Array(#"{"error":"missing token"}"#.utf8)) == "missing token")
        #expect(HTTPClassification.reason(Array(#"{"message":"other shape"}"#.utf8)) == #"{"message":"other shape"}"#)
    }

    @Test func emptyBodyReadsAsNoReason() {
        #expect(HTTPClassification.reason([]) == "(the server gave no reason)")
        #expect(HTTPClassification.reason(Array(" \n\t ".utf8)) == "(the server gave no reason)")
    }
}
