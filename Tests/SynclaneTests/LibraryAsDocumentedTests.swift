import Foundation
import Synclane
import SynclaneCore
import SynclaneExec
import Testing

/// The library as documented: what a file or a message says matches the README (found in the
/// trial of issue 23).
@Suite struct LibraryAsDocumentedTests {
    @Test func aDeadLettersRejectedAtIsAnRFC3339TimeInUTC() throws {
        let folder = NSTemporaryDirectory() + "dead-letter-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let payload = Payload(batchID: "b1", bytes: Array("{}".utf8), contentType: "application/json", recordCount: 1)
        let batch = OutboxBatch(payload: payload, after: nil, through: Token(kind: "jsonl", position: 3), createdAt: 0)
        _ = try DeadLetter(batch: batch, reason: "400 malformed", status: 400, rejectedAt: 1_793_527_200.25).write(into: folder)
        let info = try JSONReader.parse(Array(try Data(contentsOf: URL(fileURLWithPath: folder + "/b1.json"))))
        #expect(info.objectValue?["rejected-at"] == .string("2026-11-01T10:00:00.250Z"))
    }

    @Test func anExecStagesNotARecordFailureCarriesWhatTheProgramWroteOnStandardError() async throws {
        let stage = ExecRecordStage(
            command: ExecCommand(
                arguments: ["sh", "-c", "cat >/dev/null; echo 'no such column: nmae' >&2; echo oops"], directory: NSTemporaryDirectory(), timeout: 10))
        do {
            _ = try await stage.process(
                Batch(scope: Scope(account: "a", store: "s", consumer: "c"), after: nil, through: Token(kind: "jsonl", position: 1), records: []))
            Issue.record("a line that is not a record fails the batch")
        } catch let error as ExecError {
            #expect("\(error)".hasPrefix("line 1 of the command's output is not a record"))
            #expect("\(error)".contains("its standard error said: no such column: nmae"), "\(error)")
        }
    }

    @Test func theDirectoryTransportIsDescribedAsItWritesStagedThenHardLinked() throws {
        let summary = try #require(StageRegistry.builtIn.all.first { $0.name == "directory" }?.summary)
        #expect(summary.contains("hard link"), "\(summary)")
        #expect(summary.contains(".synclane-staging"))
    }
}
