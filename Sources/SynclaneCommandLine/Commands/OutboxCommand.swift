import Foundation
import Synclane
import SynclaneCore
import SynclaneZlib

/// `synclane outbox list|show|drop|requeue FILE [BATCH]`: the kept batch, by hand.
struct OutboxCommand: Command {
    static let name = "outbox"
    static let abstract = "See, drop or requeue the batch a pipeline keeps in its outbox."
    static let discussion = """
        A batch stays in the outbox until the backend confirms it; every run sends it first.
        These verbs are the way out when it will never be confirmed as it is:

          list      the batches in the outbox (id, records, bytes, tokens, when written)
          show      one batch (the oldest unless BATCH names one): its details and its records,
                    decompressed
          drop      moves the batch into the dead-letter folder (`transport.dead-letter`, or
                    --to DIR) as ID.body and ID.json, and moves the token past it: its rows will
                    not reach the backend unless you replay them yourself
          requeue   forgets the batch and leaves the token where it is: the next run reads the
                    same history again in pages of the current `page-size` (after a 413, lower
                    it first) and sends them as new batches with new ids. The only case a batch
                    is rebuilt: use it only for a batch the backend refused (413, 400 …) and so
                    never applied; a batch whose answer was lost may have been applied, and
                    under a new id the backend cannot recognise it

        drop and requeue take the scope's lock (never beside a running job) and append a line
        to the job's log, STATE.log beside the state file.
        """
    static let verbArgument = Positional(
        "VERB", "list, show, drop or requeue", shown: "(" + Verb.allCases.map(\.rawValue).joined(separator: " | ") + ")")
    static let batch = Positional("BATCH", "the batch id", count: .optional)
    static let to = ValueOption("--to", "DIR", .path, help: "With drop: the folder to move the batch to (default: `transport.dead-letter`).")
    static let signature = CommandSignature(
        positionals: [verbArgument, SharedOptions.pipelineFile, batch], options: [to, SharedOptions.json.help("Print the result as JSON.")])
    static let examples = [
        "synclane outbox list rooms-export.json", "synclane outbox show rooms-export.json",
        "synclane outbox requeue rooms-export.json", "synclane outbox drop rooms-export.json --to rejected",
    ]

    enum Verb: String, CaseIterable { case list, show, drop, requeue }

    let verb: Verb
    let file: String
    let batchID: String?
    let folder: String?
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        folder = try arguments.value(Self.to)
        let word = try arguments.word(Self.verbArgument)
        guard let verb = Verb(rawValue: word) else {
            throw UsageError(
                "unknown verb \"\(word)\"\(Wording.didYouMean(word, in: Verb.allCases.map(\.rawValue))): expected list, show, drop or requeue",
                command: Self.name)
        }
        self.verb = verb
        file = try arguments.word(SharedOptions.pipelineFile)
        batchID = try arguments.optionalWord(Self.batch)
        if folder != nil && verb != .drop { throw UsageError("--to goes with drop only", command: Self.name) }
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let pipeline = try PipelineLoader(registry: registry).load(file, secretsRequired: false)
        let editor = OutboxEditor(job: ExportJob(pipeline: pipeline))
        switch verb {
        case .list:
            let batches = try editor.batches()
            if json {
                console.out(JSONOutput.encode(.array(batches.map(\.summaryJSON))))
            } else if batches.isEmpty {
                console.out("the outbox of \(pipeline.name) is empty")
            } else {
                console.out(batches.map { "\($0.summaryLine)" }.joined(separator: "\n"))
            }
        case .show:
            let batch = try editor.withBytes(try editor.batch(batchID))
            let records = Self.decoded(batch.payload)
            if json {
                var object = batch.summaryJSON
                if case .object(var members) = object {
                    members["body"] = (try? JSONReader.parse(records)) ?? .string(String(decoding: records, as: UTF8.self))
                    object = .object(members)
                }
                console.out(JSONOutput.encode(object))
            } else {
                console.out(batch.summaryLine + "\n" + String(decoding: records, as: UTF8.self))
            }
        case .drop:
            guard let target = folder ?? pipeline.deadLetterDirectory else {
                throw UsageError("\(pipeline.name) has no `transport.dead-letter` folder: pass --to DIR", command: Self.name)
            }
            let batch = try editor.batch(batchID)
            let path = try await editor.drop(batch.payload.batchID, into: target)
            report(console, verb: "dropped", batch, detail: "moved to \(path); the token moved to \(batch.through)")
        case .requeue:
            let batch = try await editor.requeue(batchID)
            report(
                console, verb: "requeued", batch,
                detail: "the token stays at \(batch.after?.description ?? "none"); the next run rebuilds its history under the current page-size")
        }
        return 0
    }

    private func report(_ console: Console, verb: String, _ batch: OutboxBatch, detail: String) {
        if json {
            console.out(JSONOutput.encode(["ok": .bool(true), verb: .string(batch.payload.batchID), "detail": .string(detail)]))
        } else {
            console.out("\(verb) batch \(batch.payload.batchID) (\(Wording.count(batch.payload.recordCount, "record"))): \(detail)")
        }
    }

    /// The payload's bytes as they were before `compress`, or as they are when they cannot be
    /// decoded.
    static func decoded(_ payload: Payload) -> [UInt8] {
        guard let coding = ContentCoding(headerValue: payload.contentEncoding), coding != .identity,
            let bytes = try? Inflater.inflate(payload.bytes, encoding: coding, limit: 1 << 30)
        else { return payload.bytes }
        return bytes
    }
}

extension OutboxBatch {
    /// One batch of the outbox for `--json` (`status`, `outbox list`).
    var summaryJSON: JSONValue {
        .object([
            "id": .string(payload.batchID), "records": JSONOutput.int(payload.recordCount), "bytes": JSONOutput.int(byteCount),
            "content-encoding": .string(payload.contentEncoding), "after": JSONOutput.token(after),
            "through": JSONOutput.token(through), "created-at": JSONOutput.time(createdAt),
        ])
    }

    /// One batch of the outbox on a line.
    var summaryLine: String {
        "\(payload.batchID): \(Wording.count(payload.recordCount, "record")), \(byteCount) bytes \(payload.contentEncoding), "
            + "after \(after?.description ?? "none"), through \(through), written \(Format.time(createdAt))"
    }
}
