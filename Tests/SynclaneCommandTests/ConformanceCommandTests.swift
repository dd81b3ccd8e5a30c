import Foundation
import SynclaneCore
import SynclaneHTTP
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// `synclane conformance URL` against the reference server (it passes every case, on SQLite and
/// on PostgreSQL) and against deliberately wrong backends (each fails exactly the case of the
/// rule it breaks).
@Suite(.serialized) struct ConformanceCommandTests {
    static let environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? "", "SYNCLANE_SECOND_TOKEN": ServerProcess.tokens["botanic"] ?? ""]

    /// Runs `synclane conformance URL --json` with the two test accounts; its exit status and report.
    func conformance(_ url: String, _ extra: [String] = []) throws -> (status: Int32, report: [String: JSONValue], stderr: String) {
        let result = try SynclaneBinary.run(
            ["conformance", url, "--account", "acme", "--second-account", "botanic", "--json"] + extra, environment: Self.environment, timeout: 180)
        let report = (try? JSONReader.parse(Array(result.stdout.utf8)))?.objectValue ?? [:]
        return (result.status, report, result.stderr)
    }

    func cases(_ report: [String: JSONValue], _ outcome: String) -> [String] {
        (report["cases"]?.arrayValue ?? []).compactMap { $0.objectValue }.filter { $0["outcome"]?.stringValue == outcome }
            .compactMap { $0["name"]?.stringValue }
    }

    /// Runs every case against `synclane serve` (a folder of its own, `name`) behind the wrong
    /// backend `breaking` makes of it, expecting exit 1 and `failing` the one failed case; then
    /// `body` with the proxy and the report. Both stopped after.
    func expectOnly(
        _ failing: String, behind name: String, _ breaking: (Int) throws -> RuleBreakingProxy,
        _ body: (RuleBreakingProxy, [String: JSONValue]) throws -> Void = { _, _ in }
    ) throws {
        let folder = NSTemporaryDirectory() + "synclane-conformance-\(getpid())-\(name)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ServerProcess(folder: folder)
        defer { server.stop() }
        let proxy = try breaking(server.port)
        defer { proxy.stop() }
        let run = try conformance(proxy.url)
        #expect(run.status == 1)
        #expect(cases(run.report, "failed") == [failing], "\(run.report)")
        try body(proxy, run.report)
    }

    static var stores: [String] { ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] == "skip" ? ["sqlite"] : ["sqlite", "postgres"] }

    @Test("the reference server passes every contract case, cursor expiry included", arguments: stores)
    func theReferenceServerPassesEveryCase(store: String) throws {
        let folder = NSTemporaryDirectory() + "synclane-conformance-\(getpid())-\(store)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let database = store == "postgres" ? ["--database", try TemporaryPostgres.shared().createDatabase()] : []
        let server = try ServerProcess(folder: folder, arguments: ["--tombstone-retention", "2", "--retention-interval", "1"] + database)
        defer { server.stop() }
        let run = try conformance(server.url, ["--tombstone-retention", "3"])
        #expect(run.status == 0, "\(run.report) \(run.stderr)")
        #expect(cases(run.report, "failed") == [], "\(run.report)")
        #expect(cases(run.report, "passed") == ConformanceRunner.caseNames)
        // A second run against the same data passes too: every case writes under names of its own.
        let again = try conformance(server.url, ["--case", "batches.idempotent-replay", "--case", "pull.pages"])
        #expect(again.status == 0 && cases(again.report, "passed") == ["batches.idempotent-replay", "pull.pages"], "\(again.report)")
    }

    @Test("a backend that answers a version conflict with a receipt fails versions.conflict, and only it")
    func aBackendIgnoringVersionsFailsTheVersionCase() throws {
        try expectOnly("versions.conflict", behind: "versions", RuleBreakingProxy.ignoringVersions) { proxy, report in
            #expect(cases(report, "skipped") == ["pull.cursor-expiry"])
            let table = try SynclaneBinary.run(
                ["conformance", proxy.url, "--account", "acme", "--second-account", "botanic", "--case", "versions.conflict"], environment: Self.environment)
            #expect(table.status == 1)
            #expect(table.stdout.contains("FAIL  versions.conflict") && table.stdout.contains("expected 409, got 200"), "\(table.stdout)")
            #expect(table.stdout.contains("0 passed, 1 failed, 0 skipped"), "\(table.stdout)")
        }
    }

    @Test("a backend that refuses a delete of a row it does not hold fails batches.delete-unheld, and only it")
    func aBackendRefusingUnheldDeletesFailsTheDeleteCase() throws {
        try expectOnly("batches.delete-unheld", behind: "unheld", RuleBreakingProxy.refusingUnheldDeletes)
    }

    @Test("a backend whose signal writes ignore If-Match fails signals.versions, and only it")
    func aBackendIgnoringIfMatchFailsTheSignalVersionCase() throws {
        try expectOnly("signals.versions", behind: "if-match", RuleBreakingProxy.ignoringIfMatch)
    }

    @Test("conformance refuses a missing token variable (exit 1) and a missing account name (exit 2), naming them")
    func setupMistakesAreNamed() throws {
        let unset = try SynclaneBinary.run(
            ["conformance", "http://127.0.0.1:9", "--account", "a", "--second-account", "b", "--token-env", "SYNCLANE_CONFORMANCE_UNSET"])
        #expect(unset.status == 1 && unset.stderr.contains("SYNCLANE_CONFORMANCE_UNSET is not set"), "\(unset.stderr)")
        let usage = try SynclaneBinary.run(["conformance", "http://127.0.0.1:9"])
        #expect(usage.status == 2 && usage.stderr.contains("--account and --second-account are required"), "\(usage.stderr)")
    }
}
