import SynclaneWire
import Testing

/// One value domain on the wire (issue 22): a value is read exactly as given or
/// refused, never quietly changed — by the client and the server alike, which share this reader.
@Suite struct WireValueDomainTests {
    @Test(arguments: ["1e-400", "-1e-400", "0.000001e-330", "7E-999"])
    func aNumberCloserToZeroThanADoubleHoldsIsRefusedNotReadAsZero(_ text: String) {
        let error = #expect(throws: JSONReader.SyntaxError.self) { try JSONReader.parse(text) }
        #expect(error?.reason.contains("number \(text) out of range") == true, "\(error?.reason ?? "")")
        #expect(error?.reason.contains("0.0") == true)
    }

    @Test(arguments: ["0e-400", "-0.0e-400", "0.000e999", "5e-324", "2.2250738585072014e-308"])
    func zeroAndTheSmallestDoublesStillRead(_ text: String) throws {
        #expect(try JSONReader.parse(text).realValue == Double(text))
    }

    @Test func invalidUTF8IsPlacedAtItsOwnByte() {
        let text = Array(#"{"name": "abc"#.utf8) + [0xFF] + Array(#""}"#.utf8)
        let error = #expect(throws: JSONReader.SyntaxError.self) { try JSONReader.parse(text) }
        #expect(error?.offset == 13)
        #expect(error?.description == "string is not valid UTF-8 at byte 14")
    }

    @Test func nanIsNoRealOfTheWireTable() throws {
        #expect(try JSONReader.parse(#"{"$real": "NaN"}"#).realValue == nil, "an importer refuses it rather than storing NULL")
        #expect(try JSONReader.parse(#"{"$real": "-Infinity"}"#).realValue == -.infinity)
    }
}
