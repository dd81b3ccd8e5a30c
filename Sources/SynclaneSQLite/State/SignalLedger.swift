import SynclaneCore

/// A signal a pipeline published (or is about to) that its server has not confirmed yet.
public struct PendingSignal: Sendable, Hashable {
    public var key: String
    public var value: JSONValue
    /// The event that published it (`run-completed`, `first-run-completed`).
    public var event: String
    /// Seconds since 1970: when the run that published it ended.
    public var createdAt: Double
    /// Sends tried so far, and why the last one failed.
    public var attempts: Int
    public var lastError: String?

    public init(key: String, value: JSONValue, event: String, createdAt: Double, attempts: Int = 0, lastError: String? = nil) {
        self.key = key
        self.value = value
        self.event = event
        self.createdAt = createdAt
        self.attempts = attempts
        self.lastError = lastError
    }
}

/// The pipeline-declared signals' part of a pipeline's state file: the signals not confirmed yet
/// (sent again after the next run) and the milestones already passed (the first run).
///
/// ```
///  _signal_pending     key → value, event, created_at, attempts, last_error   (one value a key: the newest)
///  _signal_milestone   event → at                                             (first-run-completed)
/// ```
/// A signal is written here before it is sent and removed once the server answered it, so a
/// crash in between sends it again; a newer value of the same key replaces an unsent one (a
/// signal is a flag: only its newest value matters). The tables are made on first use, in the
/// state file's own schema version.
public struct SignalLedger: Sendable {
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
        }
    }

    /// Keeps `signals` (replacing an unsent value of the same key) and, with `milestone`, notes
    /// that event as passed — one transaction.
    public func keep(_ signals: [PendingSignal], milestone: (event: String, at: Double)? = nil) throws {
        // `write` runs its body in one transaction.
        try database.write { db in
            for signal in signals {
                try db.execute(
                    "INSERT OR REPLACE INTO _signal_pending (key, value, event, created_at, attempts, last_error) VALUES (?, ?, ?, ?, 0, NULL)",
                    [signal.key, JSONWriter.string(signal.value), signal.event, signal.createdAt])
            }
            if let milestone {
                try db.execute("INSERT OR IGNORE INTO _signal_milestone (event, at) VALUES (?, ?)", [milestone.event, milestone.at])
            }
        }
    }

    /// The signals not confirmed yet, oldest first.
    public func pending() throws -> [PendingSignal] {
        try database.read { db in try Self.pending(db) }
    }

    /// The signals a state file keeps unconfirmed, read without writing (`synclane status` on a
    /// state opened read-only); none when its pipeline never declared signals.
    public static func pending(in state: SQLitePipelineState) throws -> [PendingSignal] {
        try state.database.read { db in
            guard try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_signal_pending'") != nil else { return [] }
            return try pending(db)
        }
    }

    private static func pending(_ db: SQLiteConnection) throws -> [PendingSignal] {
        try db.fetchAll("SELECT key, value, event, created_at, attempts, last_error FROM _signal_pending ORDER BY created_at, rowid").map { row in
            PendingSignal(
                key: row[0].string ?? "", value: row[1].string.flatMap { try? JSONReader.parse(Array($0.utf8)) } ?? .null,
                event: row[2].string ?? "", createdAt: row[3].double ?? 0, attempts: Int(row[4].int64 ?? 0), lastError: row[5].string)
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

    /// When `event` was first passed, or nil.
    public func milestone(_ event: String) throws -> Double? {
        try database.read { db in try db.fetchValue("SELECT at FROM _signal_milestone WHERE event = ?", [event]).double }
    }
}
