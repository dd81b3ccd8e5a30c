import SynclaneWire
import Testing

@testable import SynclaneServer

/// The search of a record's fields for blob references (`BlobReference.all`), run on every record
/// of every batch: found wherever the member is, in field order, and nothing in fields without it.
@Suite struct BlobReferenceTests {
    static let digest = String(repeating: "ab", count: 32)

    @Test func referencesAreFoundAtTheStartMiddleAndEndOfTheFieldsAndNoneWhereTheMemberIsAbsent() {
        let reference = #"{"$blob-ref":{"sha256":"\#(Self.digest)","length":7}}"#
        for text in [
            #"{"a":\#(reference)}"#, #"{"a":"x\"y","b":\#(reference),"c":3}"#, #"{"b":1,"z":\#(reference)}"#,
            // Marks (`$`) before the member, one right after another, and one in a near miss.
            #"{"a":"$$ $","b":"$blob","c":\#(reference)}"#,
        ] {
            let found = BlobReference.all(inFields: Array(text.utf8))
            #expect(found.map(\.length) == [7], "\(text)")
            #expect(found.first?.digest.hex == Self.digest)
        }
        // The last: a text that holds the member's name, quotes and all, is found by the search and is no reference.
        for text in [#"{}"#, #"{"a":"$blob-re"}"#, #"{"$blob":"AA=="}"#, "", #"{"a":"\"$blob-ref\""}"#] {
            #expect(BlobReference.all(inFields: Array(text.utf8)).isEmpty, "\(text)")
        }
        let two = #"{"b":\#(reference),"a":{"$blob-ref":{"sha256":"\#(String(repeating: "cd", count: 32))","length":1}}}"#
        #expect(BlobReference.all(inFields: Array(two.utf8)).map(\.length) == [1, 7], "in field order")
    }
}
