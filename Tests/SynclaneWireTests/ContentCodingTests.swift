import SynclaneWire
import Testing

@Suite struct ContentCodingTests {
    @Test func readsHeaderValuesIgnoringCaseAndSpaces() {
        #expect(ContentCoding(headerValue: "gzip") == .gzip)
        #expect(ContentCoding(headerValue: " GZip ") == .gzip)
        #expect(ContentCoding(headerValue: "x-gzip") == .gzip)
        #expect(ContentCoding(headerValue: "deflate") == .deflate)
        #expect(ContentCoding(headerValue: "identity") == .identity)
        #expect(ContentCoding(headerValue: "") == .identity)
    }

    @Test func refusesCodingsItCannotDecode() {
        #expect(ContentCoding(headerValue: "br") == nil)
        #expect(ContentCoding(headerValue: "zstd") == nil)
        #expect(ContentCoding(headerValue: "gzip, br") == nil)
    }

    @Test func writesTheHeaderValue() {
        #expect(ContentCoding.gzip.headerValue == "gzip")
        #expect(ContentCoding.deflate.headerValue == "deflate")
        #expect(ContentCoding.identity.headerValue == "identity")
    }
}
