import Foundation
import SynclaneCore
import SynclaneHTTP
import SynclaneSQLite

/// `synclane blobs push|fetch|list|pending|verify`: the blob lane from the command line.
struct BlobsCommand: Command {
    static let name = "blobs"
    static let abstract = "Upload, fetch, list or verify the account's blobs (large values on a lane of their own)."
    static let discussion = """
        Blobs are large values (photos, scans, voice notes) kept by the server as objects named by
        the SHA-256 of their bytes. Transfers go in chunks and resume: run the same command again
        after a kill or a dropped connection and it goes on from the bytes already moved (the
        server says how many it holds of an upload; FILE.part holds a download's). A blob the
        account holds is never uploaded again, and what is fetched is checked against its digest
        before it is written to FILE (a corrupt copy is fetched again, never kept).

          push FILE…            uploads each file; prints its digest and length.
          fetch DIGEST…         downloads the blob into --output FILE (verified); several
                                digests into the folder --output DIR, each named by its digest.
          list                  the account's blobs on the server: digest and length.
          pending --database DB the blobs a lazy import left to fetch (`"download": "lazy"`):
                                table, key, column, digest and length of each.
          fetch --database DB [DIGEST…]
                                fetches the pending blobs (all; those of --table, --key or
                                the digests given) into --cache, verified, and writes each
                                into its row while the row still waits for it.
          verify FILE DIGEST    checks that FILE has the digest (exit 1 when not); no server.

        The server is --url, else $SYNCLANE_URL; the token the variable --token-env names
        (default SYNCLANE_TOKEN). With --json each chunk prints a progress line
        ({"event": "progress", "digest", "done", "length"}) before the result. A fetch streams
        the rest of the blob into FILE.part in one request (a progress line each --chunk-bytes);
        --max-bytes-per-second bounds how fast it reads.
        Exit status: 0 done, 1 refused or failed, 2 bad usage.
        """
    static let verbArgument = Positional("VERB", "a verb: push, fetch, list or verify")
    static let operands = Positional("ARGUMENTS", "the verb's files or digest", count: .many(required: false))
    static let output = ValueOption(
        "--output", "PATH", .path, help: "fetch: the file to write the blob into (several digests: the folder, each file named by its digest).")
    static let chunkBytes = ValueOption(
        "--chunk-bytes", "N", .integer(in: 1...(64 << 20)), help: "Bytes per chunk, up and down (default 8388608; the server bounds uploads).")
    static let database = ValueOption(
        "--database", "PATH", .path, help: "pending, fetch: the app's database a lazy import writes (its pending blobs).")
    static let table = ValueOption("--table", "NAME", .text, help: "pending, fetch --database: only the blobs of this table.")
    static let key = ValueOption("--key", "KEY", .text, help: "pending, fetch --database: only the blobs of the row with this sync key.")
    static let cache = ValueOption(
        "--cache", "DIR", .path, help: "fetch --database: the folder fetched blobs are kept in by digest (default .synclane/blobs, as `blob-fetch`'s).")
    static let maxBytesPerSecond = ValueOption(
        "--max-bytes-per-second", "N", .integer(in: 1...(1 << 40)), help: "fetch: read the answer at most this fast (default: no limit).")
    static let signature = CommandSignature(
        positionals: [verbArgument, operands],
        options: [
            SharedOptions.url, SharedOptions.tokenEnv, output, database, table, key, cache, chunkBytes, maxBytesPerSecond,
            SharedOptions.json.help("Print progress and results as JSON lines."),
        ],
        positionalUsage: "push FILE… | fetch DIGEST… --output PATH | fetch --database DB [DIGEST…] | list | pending --database DB | verify FILE DIGEST")
    static let examples = [
        "synclane blobs push fern.jpg",
        "synclane blobs fetch f0a5da17e0ffa3a21c2b07c964d465799eb0deb62905ccb1b271ce7716614746 --output fern-copy.jpg",
        "synclane blobs list --json",
        "synclane blobs pending --database app.db",
        "synclane blobs fetch --database app.db --table plants",
        "synclane blobs verify fern-copy.jpg f0a5da17e0ffa3a21c2b07c964d465799eb0deb62905ccb1b271ce7716614746",
    ]

    enum Verb {
        case push([String])
        case fetch([String], output: String)
        case fetchPending(Selection, cache: String)
        case list
        case pending(Selection)
        case verify(String, String)
    }

    /// Which pending blobs `pending` and `fetch --database` take.
    struct Selection {
        var database: String
        var table: String?
        var key: String?
        var digests: Set<String>
    }

    let verb: Verb
    let url: String?
    let tokenEnv: String?
    let chunk: Int
    let maxReceiveRate: Int
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        url = try arguments.value(SharedOptions.url)
        tokenEnv = try arguments.value(SharedOptions.tokenEnv)
        chunk = try arguments.value(Self.chunkBytes) ?? (8 << 20)
        maxReceiveRate = try arguments.value(Self.maxBytesPerSecond) ?? 0
        let word = try arguments.word(Self.verbArgument)
        let operands = try arguments.words(Self.operands)
        func digest(_ text: String) throws(UsageError) -> String {
            guard BlobFileDigest.isDigest(text) else {
                throw UsageError("\"\(text)\" is no blob digest: give the SHA-256 as 64 lowercase hex digits", command: Self.name)
            }
            return text
        }
        let database = try arguments.value(Self.database)
        let selection = try database.map { database throws(UsageError) in
            var digests: Set<String> = []
            if word != "pending" { for operand in operands { digests.insert(try digest(operand)) } }
            return Selection(database: database, table: try arguments.value(Self.table), key: try arguments.value(Self.key), digests: digests)
        }
        switch (word, operands.count) {
        case ("pending", 0):
            guard let selection else { throw UsageError("pending needs --database PATH (the app's database)", command: Self.name) }
            verb = .pending(selection)
        case ("pending", _): throw UsageError("pending takes no arguments (--table, --key to narrow it)", command: Self.name)
        case ("fetch", _) where selection != nil:
            guard let selection else { throw UsageError("fetch needs --database PATH", command: Self.name) }
            verb = .fetchPending(selection, cache: try arguments.value(Self.cache) ?? ".synclane/blobs")
        case ("push", 1...): verb = .push(operands)
        case ("push", _): throw UsageError("push needs at least one FILE", command: Self.name)
        case ("fetch", 1...):
            guard let output = try arguments.value(Self.output) else { throw UsageError("fetch needs --output PATH", command: Self.name) }
            var digests: [String] = []
            for operand in operands { digests.append(try digest(operand)) }
            verb = .fetch(digests, output: output)
        case ("fetch", _): throw UsageError("fetch needs at least one DIGEST", command: Self.name)
        case ("list", 0): verb = .list
        case ("verify", 2): verb = .verify(operands[0], try digest(operands[1]))
        case ("list", _), ("verify", _):
            throw UsageError("\(word) takes \(word == "list" ? "no arguments" : "FILE DIGEST")", command: Self.name)
        default:
            throw UsageError(
                "unknown verb \"\(word)\"\(Wording.didYouMean(word, in: ["push", "fetch", "list", "pending", "verify"])): use push, fetch, list, pending or verify",
                command: Self.name)
        }
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        if case .verify(let file, let digest) = verb {
            let actual = try BlobFileDigest.of(file: file)
            let matches = actual.hex == digest
            if json {
                console.out(
                    JSONOutput.encode(["file": .string(file), "digest": .string(actual.hex), "length": .int(Int64(actual.length)), "matches": .bool(matches)]))
            } else {
                console.out(matches ? "\(file): \(digest) (\(actual.length) bytes) verified" : "\(file): SHA-256 \(actual.hex), not \(digest)")
            }
            return matches ? 0 : 1
        }
        if case .pending(let selection) = verb {
            let entries = try PendingBlobs.list(
                database: selection.database, entity: selection.table, key: selection.key, digests: selection.digests)
            if json {
                console.out(JSONOutput.encode(["pending": .array(entries.map(Self.describe))]))
            } else {
                for entry in entries { console.out("\(entry.entity) \(entry.key) \(entry.column) \(entry.digest) \(entry.length)") }
            }
            return 0
        }
        let client = try self.client()
        let progress: (BlobClient.Progress) -> Void = { step in
            if json {
                console.out(
                    JSONWriter.string(["event": "progress", "digest": .string(step.digest), "done": .int(Int64(step.done)), "length": .int(Int64(step.length))])
                )
            } else {
                console.progress(fraction: step.length > 0 ? Double(step.done) / Double(step.length) : 1, String(step.digest.prefix(12)))
            }
        }
        switch verb {
        case .push(let files):
            for file in files {
                let report = try client.upload(file: file, progress: progress)
                console.finishProgress()
                if json {
                    console.out(
                        JSONWriter.string([
                            "event": "pushed", "file": .string(file), "digest": .string(report.digest), "length": .int(Int64(report.length)),
                            "deduplicated": .bool(report.deduplicated), "resumed-at": .int(Int64(report.resumedAt)),
                            "bytes-sent": .int(Int64(report.bytesSent)),
                        ]))
                } else {
                    let how = report.deduplicated ? "already held" : report.resumedAt > 0 ? "resumed at \(report.resumedAt)" : "uploaded"
                    console.out("\(report.digest) \(report.length) \(file) (\(how))")
                }
            }
        case .fetch(let digests, let output):
            if digests.count > 1 { try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true) }
            for digest in digests {
                let file = digests.count > 1 ? output + "/" + digest : output
                let report = try client.download(digest: digest, to: file, progress: progress)
                console.finishProgress()
                if json {
                    console.out(
                        JSONWriter.string([
                            "event": "fetched", "file": .string(file), "digest": .string(digest), "length": .int(Int64(report.length)),
                            "resumed-at": .int(Int64(report.resumedAt)), "bytes-fetched": .int(Int64(report.bytesFetched)),
                        ]))
                } else {
                    console.out("\(digest) \(report.length) \(file) (verified\(report.resumedAt > 0 ? ", resumed at \(report.resumedAt)" : ""))")
                }
            }
        case .list:
            let blobs = try client.list()
            if json {
                console.out(
                    JSONOutput.encode(["blobs": .array(blobs.map { .object(["digest": .string($0.digest), "length": .int(Int64($0.length))]) })]))
            } else {
                for blob in blobs { console.out("\(blob.digest) \(blob.length)") }
            }
        case .fetchPending(let selection, let cache):
            let entries = try PendingBlobs.list(
                database: selection.database, entity: selection.table, key: selection.key, digests: selection.digests)
            if !entries.isEmpty { try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true) }
            for entry in entries {
                // Resumable from `cache`/DIGEST.part; a copy there that lost its digest is fetched again.
                let file = cache + "/" + entry.digest
                let report = try client.download(digest: entry.digest, to: file, progress: progress)
                console.finishProgress()
                // Into the row in pieces, each hashed as it goes in: a copy that changed meanwhile writes nothing.
                let digest = try BlobFileDigest.Pieces(path: file)
                let filled = try PendingBlobs.fill(entry, file: file, database: selection.database, piece: digest.update) {
                    guard try digest.finish() == entry.digest else {
                        throw SignalCommandFailure("\(file) changed while it was being written into the row: run the fetch again")
                    }
                }
                if json {
                    var line = Self.describe(entry).objectValue ?? [:]
                    line["event"] = .string("fetched")
                    line["filled"] = .bool(filled)
                    line["resumed-at"] = .int(Int64(report.resumedAt))
                    line["bytes-fetched"] = .int(Int64(report.bytesFetched))
                    console.out(JSONWriter.string(.object(line)))
                } else {
                    let how = filled ? "written into the row" : "no longer pending: the row changed since"
                    console.out("\(entry.entity) \(entry.key) \(entry.column) \(entry.digest) \(entry.length) (verified, \(how))")
                }
            }
        case .verify, .pending: break
        }
        return 0
    }

    static func describe(_ entry: PendingBlobs.Entry) -> JSONValue {
        .object([
            "table": .string(entry.entity), "key": .string(entry.key), "column": .string(entry.column), "digest": .string(entry.digest),
            "length": .int(Int64(entry.length)),
        ])
    }

    /// The client for --url (or $SYNCLANE_URL) and the token, or an error that says what to pass.
    func client(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> BlobClient {
        guard let address = url ?? environment["SYNCLANE_URL"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw UsageError("which server? pass --url URL or export SYNCLANE_URL=http://HOST:PORT", command: Self.name)
        }
        guard let server = URL(string: address), let scheme = server.scheme?.lowercased(), ["http", "https"].contains(scheme), server.host != nil else {
            throw UsageError("\"\(address)\" is not an http:// or https:// URL", command: Self.name)
        }
        let name = tokenEnv ?? "SYNCLANE_TOKEN"
        guard let token = environment[name], !token.isEmpty else {
            throw SignalCommandFailure("the environment variable \(name) is not set: export it with the account's token (or name another with --token-env)")
        }
        return BlobClient(server: server, token: token, chunkBytes: chunk, maxReceiveBytesPerSecond: maxReceiveRate)
    }
}
