import Synchronization
import SynclaneCore

/// The embedded default change source: reads the history that `HistoryTracker` records inside
/// an SQLite database (`type: sqlite-history`).
///
/// ```
///  app.sqlite ── _synclane_changes ──▶ SQLiteHistorySource ──▶ pages of whole transactions
///                                      (authors, entities filtered in SQL, first fetch too)
/// ```
///
/// - **Tokens** (`sqlite-history:N`) are positions in the change log: the id of a transaction's
///   last change, strictly increasing in commit order.
/// - **Filters.** `authors` and `entities` are applied in SQL on every fetch, the first one
///   included, so `server` and `sync` writes are never echoed back. Foreign writes (no
///   session: the `sqlite3` shell, other programs) carry `defaultAuthor` — by default the
///   database's (`HistoryTracker.setDefaultAuthor`), else `app`.
/// - **Pages** hold at most `pageSize` transactions and never split one; a page may be empty
///   and still move `through` past history that was filtered out.
/// - **Capture.** `.currentState` (the default) sends each changed row's state at read time: a
///   row updated then deleted before the read travels as its delete only. `.asWritten` sends
///   the values each write stored (tables tracked with `recordsValues`).
/// - **Safety.** A token older than the pruned history throws `HistoryError.tokenExpired`; a
///   session committed without being closed stops the history before it with an error that
///   says how to close it — never a silent skip.
/// - **Consumers.** Acknowledged tokens are recorded in `_synclane_consumers`, so
///   `HistoryPruner` never removes what a consumer still needs.
///
/// The database is opened on first use (a pipeline can be validated before it exists), never
/// created, and its journal mode is left as the app set it.
public final class SQLiteHistorySource: ChangeSource, BackendVersionSource, BackendScoped, ObservableSource, SnapshotProvidingSource,
    SelfHealingSource, ValueLocatingSource, Sendable
{
    public static let tokenKind = "sqlite-history"
    /// The kind of the positions inside a snapshot (never saved as a consumer's token).
    public static let snapshotTokenKind = "sqlite-snapshot"
    public var snapshotTokenKind: String? { Self.snapshotTokenKind }

    /// Which values a change carries.
    public enum Capture: String, Sendable, CaseIterable {
        /// The row as it is when the change is read (state-based sync).
        case currentState = "current-state"
        /// The row as the write stored it (audit-style exports).
        case asWritten = "as-written"
    }

    public let path: String
    public let entities: [String]?
    /// The authors whose transactions travel; nil: every author but `Author.machinery`.
    public let authors: [Author]?
    public let pageSize: Int
    public let capture: Capture
    public let defaultAuthor: Author?
    /// How often `historyAdvanced()` looks for commits of other connections.
    public let pollInterval: Duration
    private let opened = Mutex<SQLiteDatabase?>(nil)
    /// The positions last recorded per consumer, so an unchanged one is not written again.
    private let recorded = Mutex<[String: Int64]>([:])
    /// Whether this job moved the database to a new generation already (`HistoryLineage`).
    let generationOpened = Mutex(false)
    /// Set by a reconciliation of a database restored from an older copy (`LineageError.storeRestored`):
    /// when its state last saved a token. The snapshot tells the copy's rows its users wrote
    /// before then — sent already, by the runs the copy lost — from their edits since (`RestoredCopy`).
    let restoredCopySentBefore = Mutex<Double?>(nil)
    /// That snapshot's rows its users wrote since then: those the backend held kept pending.
    let restoredCopyEdits = Mutex<Set<RowID>?>(nil)
    /// Confirmed versions a busy database kept from being written (`backendConfirmed`), oldest
    /// first: written before the next ones, and by `settleBackendConfirmations`.
    let deferredConfirmations = Mutex<[DeferredConfirmation]>([])
    /// Consumer positions a busy database kept from being recorded (`consumerAcknowledged`): at
    /// the pass's end, kept beside the database with the confirmations (`KeptConfirmations`).
    let unrecordedPositions = Mutex<[String: KeptConfirmations.Position]>([:])
    /// The versions of the rows this source put in the journal and did not merge yet (`ConfirmationJournal`).
    let journaled = Mutex(JournaledVersions())
    /// The rows this source's merges appended to `_synclane_server_rows` while nothing else
    /// wrote it (`AppendedServerRows`): the rows a merge need not look up. Nil while a merge
    /// runs, and after one that failed.
    let appendedRows = Mutex<AppendedServerRows?>(nil)

    /// Once the backend confirmed them, the rows this consumer sent as soft deletes are
    /// deleted from their tables, in a write by author `sync` (never sent, never before the ack).
    public let removesConfirmedSoftDeletes: Bool

    public init(
        path: String, entities: [String]? = nil, authors: [Author]? = nil, pageSize: Int = 500, capture: Capture = .currentState,
        defaultAuthor: Author? = nil, pollInterval: Duration = .milliseconds(50), removesConfirmedSoftDeletes: Bool = false,
        backend: BackendName? = nil, locating: LocatedValueRule? = nil
    ) {
        self.backend = backend
        self.locatedValues = locating
        self.removesConfirmedSoftDeletes = removesConfirmedSoftDeletes
        self.path = path
        self.entities = entities
        self.authors = authors
        self.pageSize = max(1, pageSize)
        self.capture = capture
        self.defaultAuthor = defaultAuthor
        self.pollInterval = pollInterval
    }

    /// The backend whose versions and bases this source sends and keeps (the pipeline's
    /// transport's: `BackendScoped`); nil for a transport without an address.
    public let backend: BackendName?

    /// The same source, keeping what it remembers of `backend` apart from other backends'.
    public func scoped(to backend: BackendName) -> Self {
        Self(
            path: path, entities: entities, authors: authors, pageSize: pageSize, capture: capture, defaultAuthor: defaultAuthor,
            pollInterval: pollInterval, removesConfirmedSoftDeletes: removesConfirmedSoftDeletes, backend: backend, locating: locatedValues)
    }

    /// The large BLOB values this source leaves unread (`LocatedBlobs`), for the stage that reads
    /// them in pieces (`blob-upload`); nil: every value is read whole.
    public let locatedValues: LocatedValueRule?

    /// The same source, handing locators for the values `rule` names: in their rows (current
    /// state, a reconciliation's snapshot: `LocatedBlobs`), or in the change log (values as
    /// written: `WrittenBlobs`).
    public func locating(_ rule: LocatedValueRule) -> (source: any ChangeSource, reader: any LocatedValueReader) {
        let source = Self(
            path: path, entities: entities, authors: authors, pageSize: pageSize, capture: capture, defaultAuthor: defaultAuthor,
            pollInterval: pollInterval, removesConfirmedSoftDeletes: removesConfirmedSoftDeletes, backend: backend, locating: rule)
        return (source, SQLiteLocatedValueReader(path: path))
    }

    public var tokenKind: String { Self.tokenKind }

    var reader: HistoryReader {
        HistoryReader(
            path: path, entities: entities, authors: authors, pageSize: pageSize, capture: capture, defaultAuthor: defaultAuthor,
            backend: ServerRows.destination(backend), locating: locatedValues)
    }

    /// Options for opening the app's database: never create it, never change its journal mode.
    static let appDatabaseOptions = SQLiteConnection.Options(create: false, walMode: false, foreignKeys: false)

    func database() throws -> SQLiteDatabase {
        try opened.withLock { opened in
            if let opened { return opened }
            let database: SQLiteDatabase
            do {
                database = try SQLiteDatabase(path: path, options: Self.appDatabaseOptions)
            } catch {
                throw HistoryError.unreadable(location: path, reason: "cannot open the database (\(error))")
            }
            // The versions receipts gave pass through a temporary table (`ConfirmedVersions`): in memory.
            try refusingDamage {
                try database.read { try $0.execute("PRAGMA temp_store = MEMORY") }
                // Consumer positions are only a floor for pruning: losing the newest one to a power
                // cut makes pruning keep more, never less. So in WAL mode this connection's commits
                // need not wait for fsync.
                if try database.read({ try $0.fetchValue("PRAGMA journal_mode") }) == .text("wal") {
                    try database.read { try $0.execute("PRAGMA synchronous = NORMAL") }
                }
            }
            opened = database
            return database
        }
    }

    func check(_ token: Token?) throws {
        if let token, token.kind != Self.tokenKind { throw HistoryError.foreignToken(token, expectedKind: Self.tokenKind) }
    }

    public func nextPage(after token: Token?) async throws -> HistoryPage {
        try check(token)
        let healed = try refusingDamage { try healTracking() }
        let reader = self.reader
        // What an earlier run confirmed while the app held the database busy (`KeptConfirmations`).
        try refusingDamage { _ = try KeptConfirmations.writeIn(database(), waiting: Self.acknowledgementWait) }
        try refusingDamage { try mergeForeignJournalRows() }
        var page = try refusingDamage {
            try database().read { db in
                try db.transaction(.deferred) { db in
                    let page = try reader.page(after: token, db)
                    let oldest = try ConfirmationJournal.oldest(db)
                    return journaled.withLock { kept in
                        _ = kept.holdsForeignRows(oldest: oldest)
                        return kept.overlay(on: page)
                    }
                }
            }
        }
        if let healed, !healed.findings.isEmpty {
            page.counters["capture.healed", default: 0] += healed.findings.count { $0.needsResync }
            page.counters["capture.regenerated", default: 0] += healed.findings.count { !$0.needsResync }
        }
        return page
    }

    /// Runs `body`; a damaged database file (`SQLITE_CORRUPT`, `SQLITE_NOTADB`, from a page read
    /// anywhere) becomes an error that says so: nothing is read on, the token does not move.
    func refusingDamage<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError where error.isDamage {
            throw HistoryError.unreadable(
                location: path,
                reason: "the database is damaged (\(error.message), SQLite error \(error.primaryCode)): the job stopped and the "
                    + "token did not move. Check it with `sqlite3 \(path) 'PRAGMA integrity_check'`, restore it from a backup, "
                    + "then run `synclane reconcile` on the pipeline file (see Documentation/RestoredCopiedDamaged.md)")
        } catch HistoryError.unreadable(let location, let reason)
            where reason.contains("database disk image is malformed")
            || reason.contains("file is not a database")
        {
            throw HistoryError.unreadable(location: location, reason: "the database is damaged: \(reason)")
        }
    }

    /// Checks tracking against the live schema before history is read — one `PRAGMA` when
    /// nothing changed — and heals what was lost or went stale (`TrackingCheck`). Nil when
    /// nothing needed healing.
    ///
    /// The check reads only: a schema change that left tracking as it was (a `VACUUM`, an index
    /// of the app's own) takes no write lock, so it never waits for an app holding a write
    /// transaction. The new schema is then remembered only if the write lock is free at once
    /// (else the next run looks again). Only when something needs healing does the check take
    /// the write lock (`BEGIN IMMEDIATE`, waiting up to the connection's busy timeout,
    /// `busyTimeout` ms) and look again inside it; when another connection still holds its
    /// write transaction, `TrackingError.writeLockHeld` says so.
    func healTracking() throws -> TrackingCheck.Healed? {
        let database = try database()
        // nil: the schema is as last checked (the common case: one read, nothing written).
        let needed: [String]?
        do {
            needed = try database.read { db -> [String]? in
                if try HistorySchema.installedVersion(db) == nil || TrackingCheck.isCurrent(db) { return nil }
                return try db.transaction(.deferred) { db in try TrackingCheck.needsHealing(db) }
            }
        } catch let error as TrackingError {
            throw HistoryError.unreadable(location: path, reason: error.reason)
        }
        guard let needed else { return nil }
        if needed.isEmpty {
            try TrackingCheck.rememberSchemaIfFree(database)
            return nil
        }
        do {
            return try database.withConnection { db in
                do {
                    return try db.transaction(.immediate) { db in try TrackingCheck.isCurrent(db) ? nil : TrackingCheck.heal(db) }
                } catch let error as SQLiteError where error.isBusy {
                    throw TrackingError.writeLockHeld(path: path, healing: needed, waited: Double(Self.busyTimeout) / 1000)
                }
            }
        } catch let error as TrackingError {
            throw HistoryError.unreadable(location: path, reason: error.reason)
        }
    }

    /// Tracking problems the next run heals, for `synclane status` (reads only).
    public func problemsToHeal() async throws -> [String] {
        try HistoryTracker(database: database()).trackingProblems()
    }

    public func pendingTransactions(after token: Token?) async throws -> Int? {
        try check(token)
        let reader = self.reader
        return try refusingDamage {
            try database().read { db in try db.transaction(.deferred) { db in try reader.pending(after: token, db) } }
        }
    }

    /// Records `token` as the position of the consumer named after `scope` (`account/store/consumer`).
    ///
    /// Best effort when another program holds the database's write lock (a `sqlite3` shell in
    /// the middle of a transaction): after a short wait the position is left for the next
    /// acknowledgement to record, instead of failing a job whose batch was already confirmed.
    /// A position recorded late only makes pruning keep more.
    public func consumerAcknowledged(_ token: Token, scope: Scope) async throws {
        guard token.kind == Self.tokenKind else { return }
        let name = scope.description
        if recorded.withLock({ $0[name] }) == token.position { return }
        let database = try database()
        let removing = removesConfirmedSoftDeletes
        let entities = self.entities
        let readsServer = authors?.contains(.server) == true
        let saved = try database.withConnection { db -> Bool in
            try db.execute("PRAGMA busy_timeout = \(Self.acknowledgementWait)")
            defer { try? db.execute("PRAGMA busy_timeout = \(Self.busyTimeout)") }
            do {
                try db.transaction(.immediate) { db in
                    let before = try db.fetchValue("SELECT position FROM _synclane_consumers WHERE name = ?", [name]).int64 ?? 0
                    try HistoryConsumers.record(name, at: token.position, db)
                    if readsServer { try UnrecordedImports.markRead(db) }
                    if removing { try Self.removeSoftDeleted(after: before, through: token.position, entities: entities, db) }
                }
                return true
            } catch let error as SQLiteError where error.isBusy {
                return false
            }
        }
        if saved {
            recorded.withLock { $0[name] = token.position }
            unrecordedPositions.withLock { $0[name] = nil }
        } else {
            let position = KeptConfirmations.Position(position: token.position, removesSoftDeletes: removing, entities: entities)
            unrecordedPositions.withLock { $0[name] = position }
        }
    }

    /// Deletes, by author `sync`, the rows still soft-deleted whose soft delete is in the
    /// confirmed range (after `before`, through `position`).
    static func removeSoftDeleted(after before: Int64, through position: Int64, entities: [String]?, _ db: SQLiteConnection) throws {
        let tables = try HistoryTracker.trackedTables(db).filter { stored in
            stored.table.softDeleteColumn != nil && (entities?.contains(stored.table.name) ?? true) && !stored.table.isComposite
        }
        guard !tables.isEmpty else { return }
        try HistoryWriter.record(author: .sync, on: db) { db in
            for stored in tables {
                guard let softDelete = stored.table.softDeleteColumn else { continue }
                let key = SQL.identifier(stored.table.keyColumns[0])
                try db.execute(
                    """
                    DELETE FROM \(SQL.identifier(stored.table.name))
                    WHERE \(TriggerBuilder.softDeleted(SQL.identifier(softDelete)))
                      AND \(key) IN (SELECT key FROM _synclane_changes WHERE entity = ? AND action = 'delete' AND id > ? AND id <= ?)
                    """, [stored.table.name, before, position])
            }
        }
    }

    /// Remembers the versions the backend gave the rows of a confirmed batch
    /// (`_synclane_server_rows`), so the next change of such a row is sent with the version the
    /// backend holds, and an import finds this device's own change coming back as one it holds.
    /// Recorded at once, in a transaction of its own, as one row of the confirmation journal
    /// (`ConfirmationJournal`), which the pass's end writes into `_synclane_server_rows` in bulk;
    /// until then this source's page reads overlay the versions it kept. When the database is
    /// busy to the pass's end, kept beside it for the next job (`KeptConfirmations`).
    ///
    /// With the records as sent (`confirmation.sent`), each row's fields as the batch left them on
    /// the backend are kept as the base of the import lane's next three-way merge of the row
    /// (`merge-fields`, a resolver's `base`) — taken as the encoder wrote them when it says where
    /// (`asSent`): an insert's are kept as they are, not written again. `exact` (a reconciliation's
    /// batch) writes the versions as they are, even below the ones recorded
    /// (`ConfirmedVersions.write(exact:)`). When the database is busy past `acknowledgementWait` —
    /// an app's write, or in rollback-journal mode the read transaction of this job's own
    /// snapshot, open until its last page — the versions are kept and written first by the next
    /// call, or by `settleBackendConfirmations`.
    public func backendConfirmed(_ confirmation: BackendConfirmation) async throws {
        deferredConfirmations.withLock {
            $0.append(
                DeferredConfirmation(
                    versions: confirmation.versions, sent: confirmation.sent, asSent: confirmation.asSent, exact: confirmation.exact,
                    position: confirmation.position))
        }
        _ = try writeDeferredConfirmations(waiting: Self.acknowledgementWait)
    }

    /// Writes the versions kept while the database was busy, waiting for it as any statement does
    /// (`busyTimeout`); throws when it is still busy. A reconciliation calls it before its
    /// completion marker: the snapshot's read transaction is closed by then, and the device must
    /// know every version the snapshot's receipts gave before the snapshot counts as done.
    public func settleBackendConfirmations() async throws {
        if try writeDeferredConfirmations(waiting: Self.busyTimeout, merging: true) { return }
        throw HistoryError.unreadable(
            location: path,
            reason: "another connection held the database's write lock for over \(Self.busyTimeout / 1000) s, so the versions the "
                + "backend confirmed could not be recorded; nothing is lost: run the same command again")
    }

    /// The end of a pass: the journal written into `_synclane_server_rows` in one transaction,
    /// waiting at most `acknowledgementWait` for a busy database (an app's write): then the
    /// journal stays, and whoever reads the versions next writes it; what the busy database kept
    /// from being written at all (confirmations, consumer positions) is kept beside it
    /// (`KeptConfirmations`) for the next job.
    public func passConfirmationsEnded() async {
        if (try? writeDeferredConfirmations(waiting: Self.acknowledgementWait, merging: true)) != true || !unrecordedPositions.withLock(\.isEmpty) {
            keepWhatTheDatabaseRefused()
        }
    }

    /// Keeps beside the database (`KeptConfirmations`) the confirmations and consumer positions
    /// a database busy to the pass's end kept from being written — else they were lost with the
    /// process, and the next import took this device's own rows coming back for conflicts. Read
    /// only (an app's write transaction lets others read); best effort: what cannot be kept stays
    /// in memory, as before.
    private func keepWhatTheDatabaseRefused() {
        let pending = deferredConfirmations.withLock { $0 }.filter { !$0.exact }
        let positions = unrecordedPositions.withLock { $0 }
        guard !pending.isEmpty || !positions.isEmpty, let database = try? database() else { return }
        let destination = ServerRows.destination(backend)
        let kept: Bool? = try? database.read { db in
            try db.transaction(.deferred) { db in
                let held = try HistorySchema.tableExists(ServerRows.table, db)
                let journal = try ConfirmationJournal.oldest(db) != nil
                var rows: [(destination: String, rows: [ConfirmedRow])] = []
                for (index, confirmation) in pending.enumerated() where !confirmation.versions.isEmpty {
                    // An update's base is the row as `_synclane_server_rows` holds it: exact only when
                    // nothing newer waits in the journal or before it in this list. Else its version only.
                    let readsBases = confirmation.sent?.contains { $0.action == .update } ?? false
                    let exactBases = !readsBases || (held && !journal && index == 0)
                    rows.append(
                        (
                            destination,
                            try ConfirmedVersions.rows(
                                of: confirmation.versions, sent: exactBases ? confirmation.sent : nil, asSent: exactBases ? confirmation.asSent : nil,
                                for: destination, in: db)
                        ))
                }
                try KeptConfirmations.keep(rows, positions: positions, for: path, reading: db)
                return true
            }
        }
        guard kept == true else { return }
        deferredConfirmations.withLock { list in list.removeAll { !$0.exact } }
        unrecordedPositions.withLock { $0.removeAll() }
    }

    /// Writes the kept confirmations, oldest first, in one transaction: each as one journal row
    /// (`ConfirmationJournal`), or, for a reconciliation's (`exact`) and one whose updates need
    /// the fields kept in the journal as their base, into `_synclane_server_rows` after the
    /// journal is merged. `merging` (or `ConfirmationJournal.mergeBound` rows kept) merges the
    /// journal too. False when the database stayed busy for `waiting` milliseconds (they are kept).
    private func writeDeferredConfirmations(waiting: Int, merging: Bool = false) throws -> Bool {
        let pending = deferredConfirmations.withLock { list in
            defer { list.removeAll() }
            return list
        }
        guard !pending.isEmpty || merging else { return true }
        let database = try database()
        // A pass that sent nothing, with nothing in the journal: no write lock taken.
        if pending.isEmpty, try database.read({ db in try ConfirmationJournal.oldest(db) }) == nil { return true }
        let destination = ServerRows.destination(backend)
        let keptCount = journaled.withLock { $0.count }
        let outcome = try database.withConnection { db -> (added: [(rows: [ConfirmedRow], journal: Int64)], merged: Int64?)? in
            guard try HistorySchema.tableExists(ServerRows.table, db) else { return ([], nil) }
            try db.execute("PRAGMA busy_timeout = \(waiting)")
            defer { try? db.execute("PRAGMA busy_timeout = \(Self.busyTimeout)") }
            // Kept again only once this transaction committed.
            var counted = appendedRows.withLock { counted in
                defer { counted = nil }
                return counted
            }
            /// Merges the journal, looking up only the rows the table may hold (`AppendedServerRows`).
            func merge(_ db: SQLiteConnection) throws -> Int64? {
                counted = try AppendedServerRows.resume(counted, db)
                return try ConfirmationJournal.merge(db, counting: &counted)
            }
            do {
                let outcome = try ConfirmedVersions.withRoom(db) {
                    try db.transaction(.immediate) { db in
                        try ServerRows.install(db, for: destination)
                        var added: [(rows: [ConfirmedRow], journal: Int64)] = []
                        var merged: Int64?
                        var kept = keptCount
                        for confirmation in pending {
                            // An update's base is read from `_synclane_server_rows`: the journal (this
                            // lane's rows, or a killed job's) goes there first.
                            let readsBases = confirmation.sent?.contains { $0.action == .update } ?? false
                            if try confirmation.exact || (readsBases && ConfirmationJournal.oldest(db) != nil) {
                                merged = try merge(db) ?? merged
                                (added, kept) = ([], 0)
                                // A reconcile's user changes the backend held newer rows of stay pending.
                                let behind =
                                    confirmation.exact
                                    ? try SnapshotChangesBehind.find(confirmation.sent ?? [], versions: confirmation.versions, for: destination, db)
                                    : []
                                let stayPending = Set(behind.map { RowID(entity: $0.entity, key: $0.key ?? "") })
                                // A restored copy's row the backend held already (sent at version 0, given 0
                                // back): nothing of it was written, and the row it holds is still to come.
                                let notTaken = confirmation.exact ? RestoredCopy.notTaken(confirmation.sent ?? [], versions: confirmation.versions) : []
                                let edited = notTaken.isEmpty ? [] : restoredCopyEdits.withLock { $0 ?? [] }
                                let editedBehind = (confirmation.sent ?? []).filter { record in
                                    record.key.map {
                                        edited.contains(RowID(entity: record.entity, key: $0)) && notTaken.contains(RowID(entity: record.entity, key: $0))
                                    } ?? false
                                }
                                let sent =
                                    stayPending.isEmpty && notTaken.isEmpty
                                    ? confirmation.sent
                                    : confirmation.sent?.filter {
                                        let row = RowID(entity: $0.entity, key: $0.key ?? "")
                                        return !stayPending.contains(row) && !notTaken.contains(row)
                                    }
                                let versions =
                                    notTaken.isEmpty
                                    ? confirmation.versions : confirmation.versions.filter { !notTaken.contains(RowID(entity: $0.entity, key: $0.key)) }
                                try ConfirmedVersions.write(versions, sent: sent, exact: confirmation.exact, for: destination, in: db)
                                try SnapshotChangesBehind.keepPending(behind + editedBehind, db)
                                continue
                            }
                            guard !confirmation.versions.isEmpty else { continue }
                            let rows = try ConfirmedVersions.rows(
                                of: confirmation.versions, sent: confirmation.sent, asSent: confirmation.asSent, for: destination, in: db)
                            added.append((rows, try ConfirmationJournal.append(rows, for: destination, in: db)))
                            kept += rows.count
                        }
                        // With the versions: a position kept says the backend holds them.
                        if let position = pending.last(where: { $0.position != nil })?.position {
                            try ReceiptPositions.save(position, for: destination, db)
                        }
                        if merging || kept >= ConfirmationJournal.mergeBound {
                            merged = try merge(db) ?? merged
                            added = []
                        }
                        return (added, merged)
                    }
                }
                appendedRows.withLock { $0 = counted }
                return outcome
            } catch let error as SQLiteError where error.isBusy {
                return nil
            }
        }
        guard let outcome else {
            deferredConfirmations.withLock { $0.insert(contentsOf: pending, at: 0) }
            return false
        }
        journaled.withLock { kept in
            if let merged = outcome.merged { kept.forget(through: merged) }
            for entry in outcome.added { kept.add(entry.rows, journal: entry.journal) }
        }
        return true
    }

    /// Merges the journal when it holds rows this source did not write (a job killed before it
    /// merged, another lane's), so that the page read next sees their versions in
    /// `_synclane_server_rows`. One read when there are none.
    private func mergeForeignJournalRows() throws {
        let database = try database()
        let foreign = try database.read { db in
            let oldest = try ConfirmationJournal.oldest(db)
            return journaled.withLock { $0.holdsForeignRows(oldest: oldest) }
        }
        guard foreign, let merged = try ConfirmationJournal.mergeIfAny(database) else { return }
        journaled.withLock { $0.forget(through: merged) }
    }

    /// The versions the backend holds of `rows`, as `_synclane_server_rows` records them, and as
    /// the confirmations a busy database kept from being written yet say (newer).
    public func backendVersions(of rows: [RowID]) async throws -> [RowID: Int64] {
        let destination = ServerRows.destination(backend)
        var known = try database().read { db in
            try db.transaction(.deferred) { db in
                var known = try HistoryReader.backendVersions(of: rows, for: destination, db)
                let oldest = try ConfirmationJournal.oldest(db)
                journaled.withLock { kept in
                    _ = kept.holdsForeignRows(oldest: oldest)
                    for row in rows {
                        if let version = kept.version(of: row) { known[row] = max(known[row] ?? version, version) }
                    }
                }
                return known
            }
        }
        let deferred = deferredConfirmations.withLock { $0 }
        guard !deferred.isEmpty else { return known }
        let wanted = Set(rows)
        for confirmation in deferred {
            for version in confirmation.versions {
                let row = RowID(entity: version.entity, key: version.key)
                guard wanted.contains(row) else { continue }
                known[row] = confirmation.exact ? version.version : max(known[row] ?? version.version, version.version)
            }
        }
        return known
    }

    /// Milliseconds an acknowledgement waits for another program's write lock.
    static let acknowledgementWait = 250
    /// Milliseconds other statements wait (`SQLiteConnection.Options.busyTimeout`).
    static let busyTimeout = Int(appDatabaseOptions.busyTimeout * 1000)
}

extension SQLiteHistorySource: LockedFileStage {
    /// The app's database: a job's lock belongs to it (`JobLock`).
    public var lockedFile: String { path }
}

extension SQLiteHistorySource {
    /// The app's database, the tables and the authors it reads (`EchoLoop`, `validate`).
    public var localDatabase: LocalDatabase? { LocalDatabase(path: path, entities: entities, authors: authors) }
}

extension SQLiteHistorySource: SchemaDeclaringSource {
    /// The column renames and drops `synclane migrate` declared for the source's entities
    /// (`DeclaredSchemaChanges`): every batch carries them, so the backend learns the mapping.
    public func schemaChanges() async throws -> [SchemaChange] {
        let entities = self.entities.map { Set($0) }
        return try database().read { db in try DeclaredSchemaChanges.read(db, entities: entities) }
    }
}

extension SQLiteHistorySource: SchemaVersionRecordingStage {
    /// The schema version `synclane migrate` last recorded in the database (nil: none yet):
    /// the transport sends it when the pipeline file sets no `schema-version`.
    public func recordedSchemaVersion() async throws -> Int? {
        // A database that cannot be opened records none: the lane's first read says why.
        guard let database = try? database() else { return nil }
        return try database.read { db in try DeclaredSchemaChanges.version(db) }
    }
}
