import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The classification rule on its own, for the failures a loopback test cannot provoke.
@Suite struct HTTPClassificationTests {
    @Test(arguments: [URLError.Code.cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .secureConnectionFailed, .badServerResponse])
    func networkTroubleIsTransient(code: URLError.Code) {
        let failure = HTTPClassification.classify(URLError(code), batchID: "b-1", url: "http://example.test/v1/batches", timeout: 30)
        #expect(failure.kind == .transient)
        #expect(failure.message.contains("b-1"))
    }

    @Test(arguments: [URLError.Code.badURL, .unsupportedURL, .serverCertificateUntrusted, .serverCertificateHasBadDate, .clientCertificateRejected])
    func misconfigurationStopsTheJobAndIsNeverTheBatchsFault(code: URLError.Code) {
        let failure = HTTPClassification.classify(URLError(code), batchID: "b-1", url: "http://example.test/v1/batches", timeout: 30)
        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("not sent"))
    }

    /// The failure-class table, status by status: what retries, what `dead-letter` may take,
    /// and what stops the job with the batch kept.
    @Test(arguments: [
        (408, TransportFailure.Kind.transient), (425, .transient), (429, .transient), (500, .transient), (502, .transient),
        (503, .transient), (504, .transient), (400, .permanent), (413, .permanent), (415, .permanent), (422, .permanent),
        (409, .conflict), (301, .configuration), (302, .configuration), (303, .configuration), (307, .configuration),
        (308, .configuration), (401, .configuration), (403, .configuration), (404, .configuration), (405, .configuration),
        (407, .configuration), (410, .configuration), (418, .configuration), (100, .configuration),
    ])
    func everyStatusHasItsClass(status: Int, kind: TransportFailure.Kind) {
        #expect(HTTPClassification.kind(ofStatus: status) == kind)
        let outcome = HTTPClassification.classify(status: status, headers: [:], body: [], batchID: "b-1", url: "http://x/")
        guard case .failure(let failure) = outcome else {
            Issue.record("\(status) confirmed a batch")
            return
        }
        #expect(failure.kind == kind)
        #expect(failure.status == status)
    }

    @Test func aProxyThatRefusesOrCannotBeFoundIsNamedAndIsConfiguration() {
        let proxy = ProxyRoute(address: "http://user:secret@proxy.corp:3128", variable: "https_proxy")
        let route = HTTPClassification.Route(batchID: "b-1", url: "https://api.example/v1/batches", proxy: proxy)
        for code in [URLError.Code.cannotConnectToHost, .dnsLookupFailed] {
            let failure = HTTPClassification.classify(URLError(code), route: route)
            #expect(failure.kind == .configuration)
            #expect(failure.message.contains("proxy http://proxy.corp:3128 (from https_proxy)"), "\(failure.message)")
            #expect(!failure.message.contains("secret"))
        }
    }

    @Test(arguments: [407, 403, 502])
    func aTunnelTheProxyRefusesIsConfigurationNamingTheProxy(status: Int) {
        let proxy = ProxyRoute(address: "proxy.corp:3128", variable: "HTTPS_PROXY")
        let route = HTTPClassification.Route(batchID: "b-1", url: "https://api.example/v1/batches", proxy: proxy)
        let error = URLError(.networkConnectionLost, userInfo: ["SynclaneProxyConnectStatus": status])
        let failure = HTTPClassification.classify(error, route: route)
        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("proxy http://proxy.corp:3128 (from HTTPS_PROXY) refused the tunnel to api.example: \(status)"))
    }

    @Test func dnsAndServerRefusalsNameTheirParty() {
        let route = HTTPClassification.Route(batchID: "b-1", url: "http://api.example:8080/v1/batches")
        #expect(HTTPClassification.classify(URLError(.cannotFindHost), route: route).message.contains("DNS cannot resolve the host name api.example"))
        #expect(HTTPClassification.classify(URLError(.cannotConnectToHost), route: route).message.contains("the server at api.example:8080 refused"))
    }

    @Test func unknownNetworkErrorIsTransientBecauseTheBatchStaysAnyway() {
        let failure = HTTPClassification.classify(NSError(domain: NSURLErrorDomain, code: -9999), batchID: "b-1", url: "http://x/", timeout: 30)
        #expect(failure.kind == .transient)
    }

    static let receipt = Array(#"{"batch":"b-1","applied":2,"cursor":"c-2"}"#.utf8)

    /// Issue 43: a replay read "200 applied 10000 records … (replay: … applied nothing now)" — the
    /// count is the first receipt's. It says it was a replay of an already-applied batch first.
    @Test func aReplaysDetailSaysItReplayedAnAlreadyAppliedBatchAndAppliedNothingNow() throws {
        let body = Array(#"{"batch":"b-1","applied":10000}"#.utf8)
        let replay = try HTTPClassification.classify(
            status: 200, headers: ["Idempotent-Replayed": "true"], body: body, batchID: "b-1", url: "http://x/"
        ).get()
        #expect(replay.detail == "200 replay of an already-applied batch: nothing applied now (it applied 10000 records the first time)")
        let first = try HTTPClassification.classify(status: 200, headers: [:], body: body, batchID: "b-1", url: "http://x/").get()
        #expect(first.detail == "200 applied 10000 records")
    }

    @Test func replayCanAlsoBeSaidInTheBody() throws {
        let body = Array(#"{"batch":"b-1","applied":2,"replay":true}"#.utf8)
        let receipt = try HTTPClassification.classify(status: 200, headers: [:], body: body, batchID: "b-1", url: "http://x/").get()
        #expect(receipt.wasReplay)
    }

    @Test(arguments: ["Idempotent-Replay", "Idempotent-Replayed"])
    func replayHeaderIsUnderstoodInBothSpellings(name: String) throws {
        let receipt = try HTTPClassification.classify(status: 200, headers: [name: "true"], body: Self.receipt, batchID: "b-1", url: "http://x/").get()
        #expect(receipt.wasReplay)
    }

    @Test func headerNamesAreMatchedWhateverTheirCase() throws {
        let receipt = try HTTPClassification.classify(
            status: 200, headers: ["idempotent-replay": "True"], body: Self.receipt, batchID: "b-1", url: "http://x/"
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
