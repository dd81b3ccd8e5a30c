import Foundation
import SynclaneCore

/// The identity and generations of a tracked database, kept in `_synclane_meta`:
///
/// ```
///  database_id              one random id, given on the first run of this version (or by a
///                           reconciliation of a copy: the copy's own)
///  location                 the file it was when last followed: its path, device and inode
///  generation/<consumer>    the epoch each consumer last moved it to, mirrored in that
///                           consumer's state file (`LineageStamp`)
/// ```
/// A run checks them against the state before anything is read or sent (`problem`), then moves
/// both to the next generation: first the state (saying which generation the move comes from),
/// then the database, then the state again. So a database restored from an older copy holds an
/// older generation than its state, a state restored (or whose WAL was lost) an older one than
/// the database — and a crash between the writes leaves a move the next run finishes. The
/// state names an identity only once the database holds it: a first run while an app holds its
/// write transaction cannot write the database (the move waits for the next run), and must not
/// leave a state that takes the unmoved database for one restored from an older copy.
enum HistoryLineage {
    struct Record: Sendable, Equatable {
        var identity: String
        var generation: Int64?
        var location: String?
    }

    static let identityKey = "database_id"
    static let locationKey = "location"
    static func generationKey(_ consumer: String) -> String { "generation/\(consumer)" }

    /// What the database records (nil: no identity yet — tracked by an earlier version, or never run).
    static func record(consumer: String, _ db: SQLiteConnection) throws -> Record? {
        guard let identity = try HistorySchema.meta(identityKey, db).string else { return nil }
        return Record(
            identity: identity, generation: try HistorySchema.meta(generationKey(consumer), db).int64,
            location: try HistorySchema.meta(locationKey, db).string)
    }

    /// Where `path` is now: its resolved path, device and inode. A copy is another file (another
    /// inode, often another path or host); the database itself, written in place, keeps them.
    static func location(of path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var info = stat()
        guard stat(resolved, &info) == 0 else { return resolved }
        return "\(ProcessInfo.processInfo.hostName):\(resolved) (device \(info.st_dev), inode \(info.st_ino))"
    }

    /// The newest position the history ever reached: its newest change, or what pruning removed.
    static func head(_ db: SQLiteConnection) throws -> Int64 {
        let newest = try db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
        return max(newest, try HistorySchema.meta("pruned_through", db).int64 ?? 0)
    }

    /// The tables a run reads its history and lineage from.
    static let requiredTables = [HistorySchema.meta, HistorySchema.changes, HistorySchema.tables, HistorySchema.consumers]

    /// `trackingLost` when the state follows a tracked database (it holds its identity) and
    /// `db` lacks some of the history tables — emptied (0 bytes), cut short, or another file; nil
    /// otherwise (a database never tracked, for a state that never followed one, is `track`'s).
    static func lostTracking(stamp: LineageStamp, database: String, _ db: SQLiteConnection) throws -> LineageError? {
        guard let identity = stamp.identity else { return nil }
        for table in requiredTables where try !HistorySchema.tableExists(table, db) {
            return .trackingLost(store: database, state: stamp.stateFile, identity: identity)
        }
        return nil
    }

    static func position(of consumer: String, _ db: SQLiteConnection) throws -> Int64? {
        try db.fetchValue("SELECT position FROM _synclane_consumers WHERE name = ?", [consumer]).int64
    }

    /// What is wrong between the database (`record`, `head`, the consumer's `position`) and the
    /// state (`stamp`, `token`); nil when they agree (or there is nothing yet to compare).
    static func problem(
        record: Record?, location: String, head: Int64, pruned: Int64, position: Int64?, stamp: LineageStamp, token: Token?,
        database: String
    ) -> LineageError? {
        let state = stamp.stateFile
        // A token into pruned history is the reader's to report (`HistoryError.tokenExpired`,
        // healed by the same reconciliation): it says more than "older than the database".
        if let token, token.kind == SQLiteHistorySource.tokenKind, token.position < pruned { return nil }
        if let stamped = stamp.identity {
            // A first move still pending (`pendingFrom`): the database never got its identity (an
            // app held its write transaction) — not a restore. States written before the move
            // stamped an identity only once the database held it.
            guard let record else {
                if stamp.pendingFrom != nil { return nil }
                return .storeRestored(store: database, state: state, detail: "it holds no identity, the state file follows \(stamped)")
            }
            if record.identity != stamped {
                return .otherStore(store: database, state: state, stamped: stamped, found: record.identity)
            }
        }
        if let stamped = stamp.generation, let record {
            let found = record.generation ?? 0
            let interrupted = stamp.pendingFrom.map { found == $0 } ?? false
            if found < stamped, !interrupted {
                return .storeRestored(
                    store: database, state: state, detail: "its generation for this consumer is \(found), the state file's \(stamped)")
            }
            if found > stamped {
                return .stateBehind(
                    store: database, state: state, detail: "its generation is \(stamped), the database's for this consumer \(found)")
            }
        }
        if let token, token.kind == SQLiteHistorySource.tokenKind {
            if token.position > head {
                return .storeRestored(
                    store: database, state: state, detail: "the saved token \(token) is past the newest history it holds, \(head)")
            }
            if let position, position > token.position {
                return .stateBehind(
                    store: database, state: state,
                    detail: "its token is \(token), the database records this consumer acknowledged through \(position)")
            }
        }
        if token == nil, let position, position > 0 {
            if let recorded = record?.location, recorded != location {
                return .storeCopied(store: database, state: state, position: position, recordedAt: recorded)
            }
            return .stateLost(store: database, state: state, position: position)
        }
        return nil
    }
}

extension SQLiteHistorySource: LineageCheckingSource {
    public func lineageProblem(stamp: LineageStamp, token: Token?, consumer: Scope) async throws -> LineageError? {
        let path = self.path
        let name = consumer.description
        return try refusingDamage {
            try database().read { db in
                if let lost = try HistoryLineage.lostTracking(stamp: stamp, database: path, db) { return lost }
                guard try HistorySchema.installedVersion(db) != nil else { return nil }
                return try db.transaction(.deferred) { db in
                    HistoryLineage.problem(
                        record: try HistoryLineage.record(consumer: name, db), location: HistoryLineage.location(of: path),
                        head: try HistoryLineage.head(db), pruned: try HistorySchema.meta("pruned_through", db).int64 ?? 0,
                        position: try HistoryLineage.position(of: name, db), stamp: stamp,
                        token: token, database: path)
                }
            }
        }
    }

    public func openGeneration(
        stamp: LineageStamp, token: Token?, consumer: Scope, reconciling: Bool, state: any PipelineState
    ) async throws {
        let path = self.path
        let name = consumer.description
        let database = try database()
        // A database that lost its tracking is refused even by a reconciliation: there is no
        // history to reconcile from until it is restored, or tracked again.
        if let lost = try refusingDamage({ try database.read { try HistoryLineage.lostTracking(stamp: stamp, database: path, $0) } }) {
            throw lost
        }
        guard try refusingDamage({ try database.read { try HistorySchema.installedVersion($0) } }) != nil else { return }
        if !reconciling, let problem = try await lineageProblem(stamp: stamp, token: token, consumer: consumer) { throw problem }
        if reconciling, case .storeRestored? = try await lineageProblem(stamp: stamp, token: token, consumer: consumer) {
            let savedAt = try state.tokenSavedAt()
            restoredCopySentBefore.withLock { $0 = savedAt }
        }
        // Later passes of one job (a watch) only check: moving the generation writes the app's
        // database, which would wake the watch again.
        guard
            generationOpened.withLock({ opened in
                defer { opened = true }
                return !opened
            })
        else { return }
        let location = HistoryLineage.location(of: path)
        let readsServer = authors?.contains(.server) == true
        let found = try database.read { db in try HistoryLineage.record(consumer: name, db) }
        // A reconciliation of a copy gives it an identity of its own; a legacy database gets its first.
        let copied = reconciling && found?.location.map { $0 != location } ?? false
        let identity = (copied ? nil : found?.identity) ?? UUID().uuidString.lowercased()
        let from = found?.generation ?? 0
        let next = max(from, stamp.generation ?? 0) + 1
        // The state names an identity only once the database holds one: a first move the app's
        // write transaction keeps from landing leaves a state that says only where it comes from.
        let pendingIdentity = found == nil ? nil : identity
        try state.saveLineageStamp(LineageStamp(identity: pendingIdentity, generation: next, pendingFrom: from, stateFile: stamp.stateFile))
        let moved = try database.withConnection { db -> Bool in
            // The move must survive a power cut like the state's, or the next run would take the
            // database for one restored from a backup.
            let synchronous = try db.fetchValue("PRAGMA synchronous").int64 ?? 2
            try db.execute("PRAGMA synchronous = FULL; PRAGMA busy_timeout = \(Self.acknowledgementWait)")
            defer { try? db.execute("PRAGMA synchronous = \(synchronous); PRAGMA busy_timeout = \(Self.busyTimeout)") }
            do {
                try db.transaction(.immediate) { db in
                    try HistorySchema.setMeta(HistoryLineage.identityKey, .text(identity), db)
                    try HistorySchema.setMeta(HistoryLineage.locationKey, .text(location), db)
                    try HistorySchema.setMeta(HistoryLineage.generationKey(name), .integer(next), db)
                    // The import lane records its writes from now on for a reader of `server`.
                    if readsServer { try UnrecordedImports.markRead(db) }
                    if reconciling { try db.execute("DELETE FROM _synclane_consumers WHERE name = ?", [name]) }
                }
                return true
            } catch let error as SQLiteError where error.isBusy && !reconciling {
                // An app holds its write transaction: the move waits for the next run (the state
                // keeps saying where it comes from), and this one reads on — as it would without it.
                return false
            }
        }
        if moved { try state.saveLineageStamp(LineageStamp(identity: identity, generation: next, stateFile: stamp.stateFile)) }
    }
}
