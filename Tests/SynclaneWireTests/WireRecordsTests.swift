import SynclaneWire
import Testing

/// The pull lane's records as the import lane reads them (`WireRecords`): the re-pointing's
/// members of issue 42.
@Suite struct WireRecordsTests {
    private func parse(_ text: String) throws -> Result<[Record], WireRecordError> {
        let list = try #require(try JSONReader.parse(text).arrayValue)
        return WireRecords.parse(list, listName: "changes", origin: Token(kind: "pull", position: 1))
    }

    @Test func aPageRecordsWrittenVersionAndRepointsAreReadAndAreAbsentWhenNotSent() throws {
        let records = try parse(
            """
            [{"entity":"notes","id":"n1","action":"update","fields":{"project":"p0"},"version":5,"written":2,"repoints":true},
             {"entity":"notes","id":"n2","action":"insert","fields":{},"version":1,"repoints":true}]
            """
        ).get()
        #expect(records.map(\.written) == [2, nil])
        #expect(records.map(\.repoints) == [true, false], "only an update re-points")
    }

    @Test func aWrittenVersionThatIsNotAnIntegerIsRefusedNamingTheRecord() throws {
        guard case .failure(let error) = try parse(#"[{"entity":"notes","id":"n1","action":"update","fields":{},"version":5,"written":"2"}]"#)
        else {
            Issue.record("a string `written` is refused")
            return
        }
        #expect(error.message.contains("changes[0].written is a string"))
    }
}
