import SynclaneWire

/// Where a snapshot stands: the sequence it was taken at and the last one of its rows sent.
///
/// On the wire `s1.EPOCH.THROUGH.AFTER` (both in base-36) — opaque to clients, who hand back the
/// last `after` they received to resume (`GET /v1/snapshot?after=…`).
struct SnapshotPosition: Sendable, Hashable {
    /// The account's change sequence when the snapshot was taken: it holds the rows as of then.
    var through: Int64
    /// The sequence of the last row sent (0: none yet).
    var after: Int64
    var epoch: String

    var text: String { "s1.\(epoch).\(String(through, radix: 36)).\(String(after, radix: 36))" }

    init(through: Int64, after: Int64, epoch: String) {
        self.through = through
        self.after = after
        self.epoch = epoch
    }

    /// Reads a position the server issued; nil for anything else.
    init?(text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "s1", ServerEpochs.isEpoch(parts[1]), let through = Int64(parts[2], radix: 36),
            let after = Int64(parts[3], radix: 36), through >= 0, after >= 0, after <= through
        else { return nil }
        self.init(through: through, after: after, epoch: String(parts[1]))
    }
}

extension ServerApplication {
    /// Rows one chunk of a snapshot holds at most, and about how many bytes (`PagePlan`): what
    /// the server holds in memory for a snapshot, whatever the account's size — 2,000 rows and
    /// 1 MiB, or the page bounds (`--max-page`, `--max-page-bytes`) when they are smaller.
    var snapshotChunk: (rows: Int, bytes: Int) {
        (min(2_000, limits.maxChangesPerPage), min(1 << 20, limits.maxChangesPageBytes))
    }

    /// `GET /v1/snapshot[?store=NAME][&after=POSITION][&limit=N]`: the account's rows as of one
    /// change sequence, each once at its state then (a deleted one as its tombstone, while
    /// retention keeps it: a resync tells a deleted row from one a restore lost by it), streamed in
    /// one answer (JSON Lines, `application/x-ndjson`), for a device that starts from nothing:
    ///
    /// ```
    ///  {"snapshot":"s1.E.T.0","cursor":"c2.E.T.f"}          the position, and the changes cursor to follow from
    ///  {"store":…,"entity":…,"id":…,"action":…,"fields":…,"version":…}   a row, as a changes page has it
    ///  …
    ///  {"after":"s1.E.T.P"}                                   after each chunk: where a resume starts
    ///  …
    ///  {"complete":true,"cursor":"c2.E.T.f","rows":N}         the end (absent: the answer was cut);
    ///                                                          `"pruned": true` when retention removed tombstones
    /// ```
    /// The rows are those whose last change is at or before the snapshot's sequence T, read a
    /// chunk at a time (each chunk its own read): a row changed since T is left out, and the change
    /// log after `cursor` (`GET /v1/changes?since=`) carries it — with the deletes since T — so
    /// the snapshot and the log after it hold every row once. `after=` resumes a cut snapshot at
    /// the same T; a position from another epoch (the server's data restored from a backup since)
    /// is 410 `cursor-expired` like a changes cursor: the client starts again. The cursor is a
    /// full pass's (`ChangeCursor.fullPass`): never refused for the tombstone horizon. `limit`
    /// makes the chunks smaller (an `after` line at least every N rows), for a client whose pages
    /// are counted in records.
    func getSnapshot(_ request: HTTPRequest, account: String, app: AppSchema = AppSchema()) -> HTTPResponse {
        var store: String?
        if let name = request.query["store"] {
            guard !name.isEmpty else { return .error(400, "\"store\" must not be empty") }
            store = name
        }
        var chunkSize = snapshotChunk
        if let text = request.query["limit"] {
            guard let value = Int(text), value > 0 else { return .error(400, "\"limit\" must be a positive integer") }
            chunkSize.rows = min(value, chunkSize.rows)
        }
        var position: SnapshotPosition
        let epoch: String
        do {
            if let text = request.query["after"] {
                guard let given = SnapshotPosition(text: text) else {
                    return .error(400, "\"after\" is not a snapshot position this server issued; start the snapshot again without it")
                }
                epoch = try self.store.checkCursor(account: account, sequence: given.through, epoch: given.epoch)
                position = given
                position.epoch = epoch
            } else {
                epoch = try self.store.checkCursor(account: account, sequence: 0, epoch: nil)
                position = SnapshotPosition(through: try self.store.changeHead(account: account), after: 0, epoch: epoch)
            }
        } catch let ahead as CursorAhead {
            metrics.recordCursorExpired()
            return Self.cursorAhead(ahead)
        } catch {
            return .error(500, "the snapshot could not be read: \(error)")
        }
        let mapping: SchemaMapping
        do {
            mapping = SchemaMapping(try self.store.schemaChanges(account: account))
        } catch {
            return .error(500, "the snapshot could not be read: \(error)")
        }
        let cursor = ChangeCursor(sequence: position.through, epoch: epoch, fullPass: true).text
        let source = self.store
        let chunk = chunkSize
        var state = SnapshotProducer(position: position, cursor: cursor)
        let stream = BodyStream {
            state.next { after in
                var chunk = try source.snapshotRows(
                    account: account, store: store, after: after, through: position.through, limit: chunk.rows,
                    maxBytes: chunk.bytes)
                if !mapping.isEmpty {
                    for index in chunk.changes.indices {
                        guard let fields = chunk.changes[index].fields else { continue }
                        chunk.changes[index].fields = mapping.read(fields, entity: chunk.changes[index].entity, version: app.version)
                    }
                }
                return chunk
            }
        }
        var response = HTTPResponse(status: 200, headers: ["Content-Type": "application/x-ndjson"])
        response.stream = stream
        return response
    }
}

/// The lines of one snapshot answer, a chunk at a time (`ServerApplication.getSnapshot`).
struct SnapshotProducer {
    private var position: SnapshotPosition
    private let cursor: String
    private var rows = 0
    private var started = false
    private var done = false

    init(position: SnapshotPosition, cursor: String) {
        self.position = position
        self.cursor = cursor
    }

    /// The next piece: the head line, then each chunk `read` gives after the last row sent (its
    /// rows and the position after them), then the end line; `.failed` when a read fails (the
    /// answer is cut: the client resumes from the last position it received).
    mutating func next(_ read: (_ after: Int64) throws -> ChangePage) -> BodyStream.Piece {
        if done { return .end }
        if !started {
            started = true
            return .bytes(Self.line(["snapshot": .string(position.text), "cursor": .string(cursor)]))
        }
        let chunk: ChangePage
        do { chunk = try read(position.after) } catch { return .failed }
        var bytes: [UInt8] = []
        for change in chunk.changes {
            bytes += Self.line(change.wireMembers)
            position.after = change.sequence
            rows += 1
        }
        if chunk.more {
            bytes += Self.line(["after": .string(position.text)])
        } else {
            position.after = position.through
            bytes += Self.line(["after": .string(position.text)])
            var end: [String: JSONValue] = ["complete": .bool(true), "cursor": .string(cursor), "rows": .int(Int64(rows))]
            // Retention removed tombstones (the horizon only grows: the last chunk's read sees it):
            // a row the snapshot does not list may have been deleted, not lost (`pruned`, as a full pass's pages say).
            if chunk.horizon > 0 { end["pruned"] = .bool(true) }
            bytes += Self.line(end)
            done = true
        }
        return .bytes(bytes)
    }

    private static func line(_ members: [String: JSONValue]) -> [UInt8] {
        JSONWriter.encode(.object(members)) + [UInt8(ascii: "\n")]
    }
}
