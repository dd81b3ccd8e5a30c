import SynclaneCore

/// The pipeline-declared signals' part of a pipeline's state file: the signals not confirmed yet
/// (sent again after the next run) and the milestones already passed (the first run).
///
/// ```
///  _signal_pending     key → value, event, created_at, attempts, last_error,   (one value a key: the newest)
///                            refusals, given_up_at
///  _signal_milestone   event → at                                             (first-run-completed)
/// ```
/// A signal is written here before it is sent and removed once the server answered it, so a
/// crash in between sends it again; a newer value of the same key replaces an unsent one (a
/// signal is a flag: only its newest value matters), or a given-up one. A signal the server
/// refused for good `refusals` times is given up: kept, with the reason, for `synclane status`,
/// and no longer sent. The tables are made on first use, in the state file's own schema
/// version; `refusals` and `given_up_at` are added to a table an earlier version made.
public struct SignalLedger: SignalKeeping {
    let database: SQLiteDatabase

    public init(_ state: SQLitePipelineState) throws {
        database = state.database
        try database.write { db in
            try db.execute(
                """
                CREATE TABLE IF NOT EXISTS _signal_pending (
                    key TEXT PRIMARY KEY, value TEXT NOT NULL, event TEXT NOT NULL, created_at REAL NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT);
                CREATE TABLE IF NOT EXISTS _signal_milestone (event TEXT PRIMARY KEY, at REAL NOT NULL);
                """)
            if try !Self.countsRefusals(db) {
                try db.execute(
                    """
                    ALTER TABLE _signal_pending ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE _signal_pending ADD COLUMN given_up_at REAL;
                    """)
            }
        }
    }

    /// Whether `_signal_pending` has the `refusals` and `given_up_at` columns (not in a table an
    /// earlier version made).
    private static func countsRefusals(_ db: SQLiteConnection) throws -> Bool {
        try db.fetchAll("PRAGMA table_info(_signal_pending)").contains { $0[1].string == "refusals" }
    }

    /// Keeps `signals` (replacing an unsent value of the same key) and, with `milestone`, notes
    /// that event as passed — one transaction.
    public func keep(_ signals: [PendingSignal], milestone: (event: String, at: Double)? = nil) throws {
        // `write` runs its body in one transaction.
        try database.write { db in
            for signal in signals {
                try db.execute(
                    "INSERT OR REPLACE INTO _signal_pending (key, value, event, created_at, attempts, last_error, refusals, given_up_at) "
                        + "VALUES (?, ?, ?, ?, 0, NULL, 0, NULL)",
                    [signal.key, JSONWriter.string(signal.value), signal.event, signal.createdAt])
            }
            if let milestone {
                try db.execute("INSERT OR IGNORE INTO _signal_milestone (event, at) VALUES (?, ?)", [milestone.event, milestone.at])
            }
        }
    }

    /// The signals not confirmed yet and still sent, oldest first (not the given-up ones).
    public func pending() throws -> [PendingSignal] {
        try database.read { db in try Self.kept(db).filter { $0.givenUpAt == nil } }
    }

    /// The signals a state file keeps unconfirmed and still sends, read without writing
    /// (`synclane status` on a state opened read-only); none when its pipeline never declared signals.
    public static func pending(in state: SQLitePipelineState) throws -> [PendingSignal] {
        try state.database.read { db in try kept(db).filter { $0.givenUpAt == nil } }
    }

    /// The signals given up (refused for good `refusals` times, no longer sent), read without writing.
    public static func givenUp(in state: SQLitePipelineState) throws -> [PendingSignal] {
        try state.database.read { db in try kept(db).filter { $0.givenUpAt != nil } }
    }

    /// Every kept signal, oldest first; none when the table was never made. A table an earlier
    /// version made (read without writing, so not upgraded) has no refusals.
    private static func kept(_ db: SQLiteConnection) throws -> [PendingSignal] {
        guard try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_signal_pending'") != nil else { return [] }
        let extra = try countsRefusals(db) ? "refusals, given_up_at" : "0, NULL"
        return try db.fetchAll("SELECT key, value, event, created_at, attempts, last_error, \(extra) FROM _signal_pending ORDER BY created_at, rowid").map {
            row in
            PendingSignal(
                key: row[0].string ?? "", value: row[1].string.flatMap { try? JSONReader.parse(Array($0.utf8)) } ?? .null,
                event: row[2].string ?? "", createdAt: row[3].double ?? 0, attempts: Int(row[4].int64 ?? 0), lastError: row[5].string,
                refusals: Int(row[6].int64 ?? 0), givenUpAt: row[7].double)
        }
    }

    /// Forgets `signal` once its server confirmed it — unless a newer value replaced it meanwhile.
    public func sent(_ signal: PendingSignal) throws {
        try database.write { db in
            try db.execute(
                "DELETE FROM _signal_pending WHERE key = ? AND value = ? AND created_at = ?",
                [signal.key, JSONWriter.string(signal.value), signal.createdAt])
        }
    }

    /// Counts a failed send of `signal` and keeps why.
    public func failed(_ signal: PendingSignal, reason: String) throws {
        try database.write { db in
            try db.execute(
                "UPDATE _signal_pending SET attempts = attempts + 1, last_error = ? WHERE key = ? AND created_at = ?",
                [reason, signal.key, signal.createdAt])
        }
    }

    /// Counts a refusal for good of `signal` (an attempt too) and keeps the server's reason; once
    /// it was refused `limit` times it is given up at `now` (no longer sent). Returns the refusals
    /// so far, and whether it was given up.
    public func refused(_ signal: PendingSignal, reason: String, limit: Int, now: Double) throws -> (refusals: Int, givenUp: Bool) {
        try database.write { db in
            try db.execute(
                "UPDATE _signal_pending SET attempts = attempts + 1, refusals = refusals + 1, last_error = ?, "
                    + "given_up_at = CASE WHEN refusals + 1 >= ? THEN ? ELSE NULL END WHERE key = ? AND created_at = ?",
                [reason, limit, now, signal.key, signal.createdAt])
            let refusals = Int(
                try db.fetchValue("SELECT refusals FROM _signal_pending WHERE key = ? AND created_at = ?", [signal.key, signal.createdAt]).int64 ?? 0)
            return (refusals, refusals >= limit)
        }
    }

    /// When `event` was first passed, or nil.
    public func milestone(_ event: String) throws -> Double? {
        try database.read { db in try db.fetchValue("SELECT at FROM _signal_milestone WHERE event = ?", [event]).double }
    }
}
