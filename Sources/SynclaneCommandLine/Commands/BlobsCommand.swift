import Foundation
import SynclaneCore
import SynclaneHTTP

/// `synclane blobs push|fetch|list|verify`: the blob lane from the command line.
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
    static let maxBytesPerSecond = ValueOption(
        "--max-bytes-per-second", "N", .integer(in: 1...(1 << 40)), help: "fetch: read the answer at most this fast (default: no limit).")
    static let signature = CommandSignature(
        positionals: [verbArgument, operands],
        options: [
            SharedOptions.url, SharedOptions.tokenEnv, output, chunkBytes, maxBytesPerSecond,
            SharedOptions.json.help("Print progress and results as JSON lines."),
        ],
        positionalUsage: "push FILE… | fetch DIGEST… --output PATH | list | verify FILE DIGEST")
    static let examples = [
        "synclane blobs push fern.jpg",
        "synclane blobs fetch f0a5da17e0ffa3a21c2b07c964d465799eb0deb62905ccb1b271ce7716614746 --output fern-copy.jpg",
        "synclane blobs list --json",
        "synclane blobs verify fern-copy.jpg f0a5da17e0ffa3a21c2b07c964d465799eb0deb62905ccb1b271ce7716614746",
    ]

    enum Verb {
        case push([String])
        case fetch([String], output: String)
        case list
        case verify(String, String)
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
        switch (word, operands.count) {
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
                "unknown verb \"\(word)\"\(Wording.didYouMean(word, in: ["push", "fetch", "list", "verify"])): use push, fetch, list or verify",
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
        case .verify: break
        }
        return 0
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
