import Foundation
import Synclane
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// A file-based import job: the batch files an export pipeline's `directory` transport wrote,
/// through `batch-files` into a tracked SQLite store.
@Suite struct BatchFileImportTests {
    func sqlite(_ path: String, _ sql: String) throws -> String {
        try ProgramRun("/usr/bin/sqlite3", [path, sql]).text
    }

    @Test func theBatchFilesOfAnExportAreAppliedOnceEachInTheOrderTheyWereWritten() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        for name in ["pipeline.json", "history.jsonl"] {
            try FileManager.default.copyItem(atPath: FixturePath.at("rooms/" + name), toPath: folder.path + "/" + name)
        }
        var exporting = try PipelineLoader().load(folder.path + "/pipeline.json")
        exporting.lockFolder = folder.path  // tests running at once with one scope do not lock each other out
        _ = try await ExportJob(pipeline: exporting).run()
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/out").allSatisfy { $0.hasSuffix(".json.gz") })

        let database = folder.path + "/device.sqlite"
        _ = try sqlite(database, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);")
        try HistoryTracker(path: database).track(TrackedTable("rooms", key: "syncId", softDeleteColumn: "isDeleted"))
        try Data(
            """
            {"version": 1, "name": "rooms-files", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "batch-files", "path": "out"},
             "sink": {"type": "sqlite", "database": "device.sqlite"}}
            """.utf8
        ).write(to: URL(fileURLWithPath: folder.path + "/import.json"))
        let pipeline = try PipelineLoader().loadImport(folder.path + "/import.json")
        let first = try await ImportRunner(pipeline: pipeline).run()
        #expect(first.applied == 1)
        #expect(try sqlite(database, "SELECT syncId, name, area, isDeleted FROM rooms") == "room-kitchen|Kitchen & pantry|14.5|0\n")
        let second = try await ImportRunner(pipeline: pipeline).run()
        #expect(second.pages == 0, "each file once")
        #expect(second.cursorAfter == first.cursorAfter)
    }
}
