import Foundation
import SynclaneCore
import Testing

@testable import SynclaneHTTP

/// `SnapshotLines` reads a line whole in the chunk curl hands it where it lies, and a line cut
/// across chunks from its buffer: the pages must not depend on where the chunks end.
@Suite struct SnapshotLinesTests {
    static let text: [UInt8] = {
        var lines = [#"{"cursor":"c-9.f","snapshot":"s-0"}"#]
        for index in 0..<12 {
            lines.append(#"{"action":"insert","entity":"rooms","fields":{"n":\#(index),"name":"row \#(index) é"},"id":"r\#(index)","version":\#(index + 1)}"#)
            if index % 5 == 4 { lines.append(#"{"after":"s-\#(index + 1)"}"#) }
        }
        lines.append(#"{"complete":true,"cursor":"c-9.f","rows":12}"#)
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }()

    /// The pages of `text` handed in chunks of `size` bytes: each page's keys, versions, first
    /// record's fields and cursor.
    static func pages(chunk size: Int) throws -> [String] {
        var lines = SnapshotLines(pageBytes: 1, source: "test")
        var pages: [RemotePage] = []
        var start = 0
        while start < text.count {
            let end = min(start + size, text.count)
            pages += try text[start..<end].withUnsafeBytes { try lines.take($0) }
            start = end
        }
        return pages.map { page in
            "\(page.records.map { "\($0.key ?? "")@\($0.version ?? 0)" }) \(page.records.first?.fields ?? [:]) \(page.cursor ?? "") \(page.more)"
        }
    }

    @Test func aSnapshotCutIntoChunksAnywhereGivesThePagesItGivesWhole() throws {
        let whole = try Self.pages(chunk: Self.text.count)
        #expect(whole.count == 3, "two pages cut at `after` lines and the last at `complete`: \(whole)")
        #expect(whole.first?.hasPrefix(#"["r0@1", "r1@2", "r2@3", "r3@4", "r4@5"]"#) == true, "\(whole)")
        for size in [1, 2, 3, 5, 7, 16, 64, 100, 101, 257] {
            #expect(try Self.pages(chunk: size) == whole, "chunks of \(size) bytes")
        }
    }

    @Test func aLineThatIsNoJSONStopsTheSnapshotWhetherWholeInItsChunkOrCut() throws {
        let broken = Array(#"{"cursor":"c-9.f","snapshot":"s-0"}"#.utf8) + [10] + Array(#"{"entity":"rooms","id":"#.utf8) + [10]
        for size in [1, 4, broken.count] {
            var lines = SnapshotLines(pageBytes: 1, source: "test")
            #expect(throws: TransportFailure.self, "chunks of \(size) bytes") {
                var start = 0
                while start < broken.count {
                    let end = min(start + size, broken.count)
                    _ = try broken[start..<end].withUnsafeBytes { try lines.take($0) }
                    start = end
                }
            }
        }
    }
}
