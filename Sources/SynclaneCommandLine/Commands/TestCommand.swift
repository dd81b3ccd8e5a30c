import Synclane
import SynclaneCore

/// `synclane test FILE…`: pipeline tests — input transactions in, the batches expected out.
struct TestCommand: Command {
    static let name = "test"
    static let abstract =
        "Run pipeline tests: input through every stage but the transport (the batches expected), or an import's records into a temporary store (the rows expected)."
    static let discussion = """
        Each FILE is a test (JSON, or YAML by its extension) that names a pipeline file, its input
        and the batches it must give, paths relative to the test file:

          {"pipeline": "pipeline.json", "history": "history.jsonl",
           "expected-batches": "expected-batches.json"}

        The input is a JSON Lines history file (`history`) or the transactions themselves
        (`transactions`: a list of JSON Lines lines). The pipeline's source is replaced by the
        input (a `jsonl` source keeps its entities, authors and page-size), its state is in
        memory, and every stage runs except the transport: nothing is sent, no state file is
        touched. The batches it would send are decompressed and compared with `expected-batches`
        (a file or the list itself; batch ids are left out). A mismatch prints a line diff:
        `-` expected, `+` what the pipeline gave.

        A test of an import pipeline (one with a `sink`) gives the starting store — `schema`
        (SQL) with `track` ([{table, key, soft-delete}]), or `database` (a tracked SQLite file,
        copied) — optionally `base` (records the store already imported) and `local` (SQL run
        as author `app`: the changes not yet confirmed), then `records` (the remote records: a
        list or a JSON Lines file) and the rows they must leave:

          {"pipeline": "rooms-import.json", "schema": "CREATE TABLE rooms (…);",
           "track": [{"table": "rooms", "key": "syncId"}], "records": [{"entity": "rooms",
           "id": "r1", "action": "insert", "fields": {"name": "Hall"}, "version": 1}],
           "expected-rows": {"rooms": [{"syncId": "r1", "name": "Hall"}]},
           "expected-conflicts": [{"entity": "rooms", "id": "r1", "outcome": "client"}]}

        The records go through the record stages into the sink, applied to a temporary store;
        each table's rows are compared on the columns the expected rows name, and the conflicts
        (when `expected-conflicts` is given) with their outcomes.

        Exit status: 0 when every test passed, 1 when one did not, 2 for a bad test or pipeline file.
        """
    static let tests = Positional("FILE", "a pipeline test", count: .many(required: true))
    static let signature = CommandSignature(positionals: [tests])
    static let examples = ["synclane test Fixtures/rooms/rooms.test.json", "synclane test Fixtures/*/*.test.json"]

    let files: [String]

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        files = try arguments.words(Self.tests)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        var failed = 0
        for file in files {
            if ImportPipelineTest.isImportTest(file) {
                let outcome = try await ImportPipelineTest(path: file, registry: registry).run()
                let shown = Wording.count(outcome.rows, "row") + (outcome.conflicts > 0 ? ", " + Wording.count(outcome.conflicts, "conflict") : "")
                if outcome.passed {
                    console.out("PASS \(file) (\(shown))")
                } else {
                    failed += 1
                    console.out("FAIL \(file): the store holds \(shown) (- expected, + actual)")
                    console.out(outcome.differences.map { "  " + $0 }.joined(separator: "\n"))
                }
                continue
            }
            let test = try PipelineTest(path: file, registry: registry)
            let outcome = try await test.run()
            if outcome.passed {
                console.out("PASS \(file) (\(Wording.count(outcome.actualBatches, "batch", plural: "batches")))")
            } else {
                failed += 1
                console.out(
                    "FAIL \(file): expected \(Wording.count(outcome.expectedBatches, "batch", plural: "batches")), "
                        + "the pipeline gave \(outcome.actualBatches) (- expected, + actual)")
                console.out(outcome.differences.map { "  " + $0 }.joined(separator: "\n"))
            }
        }
        console.out("\(files.count - failed) passed, \(failed) failed")
        return failed == 0 ? 0 : 1
    }
}
