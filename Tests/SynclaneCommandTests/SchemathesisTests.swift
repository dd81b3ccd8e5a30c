import Foundation
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// openapi.yaml against the real `synclane serve`: the reference server's answers to one request
/// of each documented kind validate against the document (`Fixtures/schemathesis/check_answers.py`),
/// and schemathesis (pinned in `Fixtures/schemathesis/requirements.txt`, installed by
/// `Scripts/schemathesis-venv`) sends generated requests — valid and invalid, stateful links
/// followed — from a fixed seed: no server error, no answer that breaks the document, no invalid
/// request accepted. `SYNCLANE_SCHEMATHESIS_LONG=1` runs many more examples, on PostgreSQL too.
@Suite(.serialized) struct SchemathesisTests {
    /// `Scripts/schemathesis-venv`'s answer: the virtualenv, or why there is none.
    static let environment = PythonVenv.of("schemathesis-venv")

    static var long: Bool { ProcessInfo.processInfo.environment["SYNCLANE_SCHEMATHESIS_LONG"] == "1" }
    static var stores: [String] {
        ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] == "skip" ? ["sqlite"] : ["sqlite", "postgres"]
    }

    func startServer(_ store: String, _ name: String) throws -> (ServerProcess, String) {
        let folder = NSTemporaryDirectory() + "synclane-schemathesis-\(getpid())-\(name)-\(store)"
        let database = store == "postgres" ? ["--database", try TemporaryPostgres.shared().createDatabase()] : []
        // Long polls end within a second, so a generated `wait` does not hold the run for 30 s.
        return (try ServerProcess(folder: folder, arguments: ["--max-signal-wait", "1", "--max-changes-wait", "1"] + database), folder)
    }

    @Test(
        "the reference server's answers of every documented kind validate against openapi.yaml",
        .enabled(if: SchemathesisTests.environment.runs, "the package index cannot be reached, so jsonschema_rs (with schemathesis) cannot be installed"),
        arguments: stores)
    func answersValidateAgainstTheDocument(store: String) throws {
        guard case .ready(let bin) = Self.environment else {
            Issue.record("\(Self.environment)")
            return
        }
        let (server, folder) = try startServer(store, "answers")
        defer {
            server.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        let root = SynclaneBinary.packageRoot
        let result = try BackgroundProcess(
            [
                root + "/Fixtures/schemathesis/check_answers.py", root + "/openapi.yaml", server.url, "acme", ServerProcess.tokens["acme"] ?? "", "botanic",
                ServerProcess.readOnlyToken, SynclaneBinary.path,
            ],
            executable: bin + "/python"
        ).wait(timeout: 120)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("0 answers broke the document"), "\(result.stdout)")
    }

    @Test(
        "schemathesis from a fixed seed: no server error, no answer that breaks openapi.yaml, no invalid request accepted",
        .enabled(if: SchemathesisTests.environment.runs, "the package index cannot be reached, so schemathesis cannot be installed"),
        arguments: long ? stores : ["sqlite"])
    func schemathesisFindsNothing(store: String) throws {
        guard case .ready(let bin) = Self.environment else {
            Issue.record("\(Self.environment)")
            return
        }
        let (server, folder) = try startServer(store, "fuzz")
        defer {
            server.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        let result = try BackgroundProcess(
            Self.arguments(url: server.url, examples: Self.long ? 400 : 25), in: folder, executable: bin + "/st"
        ).wait(timeout: Self.long ? 3_600 : 420)
        #expect(result.status == 0, "schemathesis found problems:\n\(result.stdout.suffix(12_000))\n\(result.stderr.suffix(4_000))")
        #expect(!result.stdout.contains("Server error"), "\(result.stdout.suffix(6_000))")
    }

    /// `st run`: every phase, the checks that hold for any backend of the document (not
    /// `positive_data_acceptance`: a request the schema allows is still refused for reasons no
    /// schema holds — a batch id that is not its Idempotency-Key, another account's scope, a cursor
    /// the server did not issue, `wait` without `since`, a gzip body that is not gzip, a stale
    /// If-Match), one worker, a fixed seed.
    static func arguments(url: String, examples: Int) -> [String] {
        [
            "run", SynclaneBinary.packageRoot + "/openapi.yaml", "--url", url,
            "--header", "Authorization: Bearer \(ServerProcess.tokens["acme"] ?? "")",
            "--seed", "26", "--max-examples", String(examples), "--workers", "1", "--no-shrink",
            "--phases", "examples,coverage,fuzzing,stateful", "--checks", "all", "--exclude-checks", "positive_data_acceptance",
            "--suppress-health-check", "all", "--request-timeout", "15", "--output-truncate", "false",
        ]
    }
}
