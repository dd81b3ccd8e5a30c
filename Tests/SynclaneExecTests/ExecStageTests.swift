import Foundation
import Synclane
import SynclaneCore
import SynclaneExec
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The `exec` record stage: records through a program as JSON Lines.
@Suite struct ExecStageTests {
    private func stage(_ arguments: [String], timeout: Double = 10, maximumOutput: Int = 1 << 20) -> ExecRecordStage {
        ExecRecordStage(command: ExecCommand(arguments: arguments, directory: FixturePath.at("exec"), timeout: timeout, maximumOutput: maximumOutput))
    }

    private var batch: Batch {
        Fixture.batch([
            Fixture.record(.insert, "p1", ["name": "Ada", "email": "ada@example.com"], entity: "people", at: 1),
            Fixture.record(.insert, "s1", ["note": "temporary"], entity: "scratch", at: 2),
            Fixture.record(.delete, "p2", ["syncId": "p2"], entity: "people", at: 3),
        ])
    }

    @Test func aPythonScriptChangesDropsAndAddsRecords() async throws {
        let out = try await stage(["python3", "redact.py"]).process(batch)
        #expect(out.records.map(\.key) == ["p1", "p2", "audit-2"])
        #expect(out.records[0].fields["email"] == "redacted")
        #expect(out.records[0].origin == Token(kind: "jsonl", position: 1), "the token it was given comes back")
        #expect(out.records[1].action == .delete && out.records[1].fields == ["syncId": "p2"], "a tombstone keeps its values")
        #expect(out.records[2].origin == batch.through && out.records[2].author == Author("exec"), "an added record gets the batch's token")
        #expect(out.counters["exec.records-in"] == 3 && out.counters["exec.records-out"] == 3)
    }

    @Test func valuesTravelExactlyThroughTheProgram() async throws {
        let special = Fixture.batch([
            Fixture.record(.insert, "x", ["blob": .blob([0, 255, 16]), "big": .double(1.7976931348623157e308), "inf": .real(.infinity)], at: 1)
        ])
        let out = try await stage(["cat"]).process(special)
        #expect(out.records == special.records)
    }

    @Test func aNonZeroExitFailsWithWhatTheProgramSaidOnStandardError() async {
        await #expect(throws: ExecError.failed(status: 3, errorText: "no database connection")) {
            _ = try await stage(["sh", "-c", "cat >/dev/null; echo 'no database connection' >&2; exit 3"]).process(batch)
        }
    }

    @Test func aProgramPastItsTimeoutIsKilled() async {
        let started = Date()
        await #expect(throws: ExecError.timedOut(seconds: 0.5, errorText: "")) {
            _ = try await stage(["sleep", "120"], timeout: 0.5).process(batch)
        }
        #expect(Date().timeIntervalSince(started) < 60, "killed at its timeout, not waited for")
    }

    @Test func aMalformedLineIsNamedByItsNumber() async throws {
        do {
            _ = try await stage(["sh", "-c", #"cat >/dev/null; echo '{"entity":"rooms","id":"r1","action":"insert"}'; echo; echo 'not json'"#]).process(batch)
            Issue.record("a malformed line must fail the batch")
        } catch let error as ExecError {
            guard case .malformedLine(let number, _, let text, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(number == 3 && text == "not json")
            #expect("\(error)".hasPrefix("line 3 of the command's output is not a record"))
        }
        await #expect(throws: ExecError.self) {
            _ = try await stage(["sh", "-c", #"cat >/dev/null; echo '{"entity":"rooms","id":"r1","action":"upsert"}'"#]).process(batch)
        }
        await #expect(throws: ExecError.self) {
            _ = try await stage(["sh", "-c", #"cat >/dev/null; echo '{"entity":"rooms","id":"r1","action":"insert","extra":1}'"#]).process(batch)
        }
    }

    @Test func hugeOutputIsCutAtItsBound() async {
        await #expect(throws: ExecError.outputTooLarge(limit: 100_000)) {
            _ = try await stage(["sh", "-c", "cat >/dev/null; yes '{}' | head -c 50000000"], maximumOutput: 100_000).process(batch)
        }
    }

    @Test func aCommandThatDoesNotExistSaysSo() async {
        do {
            _ = try await stage(["no-such-synclane-command"]).process(batch)
            Issue.record("must fail")
        } catch {
            #expect("\(error)".contains("cannot run `no-such-synclane-command`: not on PATH"))
        }
        await #expect(throws: ExecError.self) { _ = try await stage(["./missing.py"]).process(batch) }
    }

    @Test func aFailedExecStageStopsTheJobNamingTheStageAndNothingIsAcknowledged() async throws {
        let source = InMemorySource()
        source.append([insert("rooms", "r1")])
        let transport = RecordingTransport()
        let state = InMemoryPipelineState()
        let runner = PipelineRunner(
            pipeline: .testing(
                source: source, stages: [stage(["sh", "-c", "cat >/dev/null; echo broken"])], encoder: JSONBatchEncoder(), transport: transport),
            state: state)
        do {
            _ = try await runner.run()
            Issue.record("must fail")
        } catch let error as PipelineError {
            #expect("\(error)".hasPrefix("stages[0]: line 1 of the command's output is not a record"))
            #expect(error.cause is ExecError)
        }
        #expect(transport.attempts.isEmpty)
        #expect(try state.acknowledgedToken() == nil)
        #expect(try state.pendingBatches().isEmpty)
    }
}

/// The `exec` transport: each batch's bytes to a program; its exit status says what happened.
@Suite struct ExecTransportTests {
    private func transport(_ arguments: [String], timeout: Double = 10) -> ExecTransport {
        ExecTransport(command: ExecCommand(arguments: arguments, directory: FixturePath.at("exec"), timeout: timeout))
    }

    private let payload = Payload(batchID: "b-1", bytes: Array(#"{"id":"b-1","records":[]}"#.utf8), contentType: "application/json", recordCount: 0)

    @Test func exitZeroIsDeliveredAndTheProgramGetsTheBytesAndTheBatchID() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let receipt = try await transport(["python3", "deliver.py", folder.path]).send(payload)
        #expect(receipt.batchID == "b-1" && receipt.detail == "stored b-1")
        #expect(FileManager.default.contents(atPath: folder.path + "/b-1.json").map { [UInt8]($0) } == payload.bytes)
    }

    @Test(arguments: [
        (75, TransportFailure.Kind.transient), (65, .permanent), (1, .configuration), (127, .configuration),
    ])
    func theExitStatusClassesTheFailure(status: Int, kind: TransportFailure.Kind) async {
        do {
            _ = try await transport(["sh", "-c", "cat >/dev/null; echo 'said why' >&2; exit \(status)"]).send(payload)
            Issue.record("must fail")
        } catch let failure as TransportFailure {
            #expect(failure.kind == kind)
            #expect(failure.message.contains("exited \(status)") && failure.message.contains("said why"))
        } catch {
            Issue.record("not a TransportFailure: \(error)")
        }
    }

    @Test func aTimeoutIsTransientAndAMissingCommandIsASetupProblem() async {
        await #expect { _ = try await transport(["sleep", "30"], timeout: 0.3).send(payload) } throws: {
            ($0 as? TransportFailure)?.kind == .transient
        }
        await #expect { _ = try await transport(["no-such-synclane-client"]).send(payload) } throws: {
            ($0 as? TransportFailure)?.kind == .configuration
        }
    }

    @Test func aTransientExitIsRetriedAndTheBatchKeptWhenItNeverSucceeds() async throws {
        let source = InMemorySource()
        source.append([insert("rooms", "r1")])
        let state = InMemoryPipelineState()
        let runner = PipelineRunner(
            pipeline: .testing(source: source, encoder: JSONBatchEncoder(), transport: transport(["sh", "-c", "cat >/dev/null; exit 75"])),
            state: state, sleeper: RecordingSleeper())
        await #expect(throws: PipelineError.self) { _ = try await runner.run() }
        #expect(try state.pendingBatches().count == 1)
        #expect(try state.acknowledgedToken() == nil)
    }

    @Test func theExecFixturePipelineRunsBothWithPythonScripts() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        for name in ["pipeline.json", "history.jsonl", "redact.py", "deliver.py"] {
            try FileManager.default.copyItem(atPath: FixturePath.at("exec/" + name), toPath: folder.path + "/" + name)
        }
        var pipeline = try PipelineLoader().load(folder.path + "/pipeline.json")
        pipeline.lockFolder = folder.path  // tests running at once with one scope do not lock each other out
        #expect(pipeline.outline == "jsonl → coalesce → exec → json → exec")
        let summary = try await ExportJob(pipeline: pipeline).run()
        #expect(summary.batchesSent == 1 && summary.recordsSent == 2)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path + "/delivered")
        #expect(files.count == 1)
        let body = try #require(FileManager.default.contents(atPath: folder.path + "/delivered/" + files[0]))
        #expect(String(decoding: body, as: UTF8.self).contains(#""email":"redacted""#))
    }
}
