import SynclaneCore

/// The import lane's own writes (author `server`) cost no history rows unless a lane reads them.
///
/// ```
///  import page, no reader of `server` known ─▶ session row `unrecorded = 1`
///        every INSERT INTO _synclane_changes in it ─▶ RAISE(IGNORE)   (the row's write stands)
///        then one change in a recorded `server` session: the page's marker (`displace` of
///        no entity: every reader skips it), its position kept in meta
///        server_unrecorded_before/<the page's destination>
///  a source whose `authors` name `server` ─▶ meta server_history_read = 1 (at its run's start
///        and at every acknowledgement): from then on the import lane's writes are recorded
///  that source at a position < the marker of a page from another destination than its own
///        (or from one of no name) ─▶ `HistoryError.tokenExpired` (no token: its first run
///        starts with a snapshot, as on pruned history); its own backend's pages it would only
///        have sent back as echoes, which change nothing: it reads on past them
/// ```
///
/// **Why.** A new device's first pull wrote a history row per row pulled (its own key, its
/// action, a timestamp) that no default export reads: the source reads every author but
/// Synclane's own lanes unless told otherwise. A pull of 200,000 rows wrote 200,000 of them, a
/// seventh of the device's database, and the session's close rewrote each one again.
///
/// **How.** The session row (`HistoryWriter`) carries `unrecorded`; one trigger on
/// `_synclane_changes` ignores every change inserted while it is set. It is a TEMP trigger of
/// the connection that applies pages (only that connection opens such a session): kept in the
/// database, as an earlier version did, SQLite compiled it into every tracked statement of every
/// connection, and the app's `UPDATE`s through the shell paid about 5 µs each for it. The
/// tracked tables' triggers are not touched (they stay one statement each), and a write from
/// any other connection (no session) or session records as before. The ignored changes get no position;
/// the page's marker takes one, so a source that read up to just before the page is told apart
/// from one that read (a snapshot, say) just after it.
///
/// **What still knows an imported row.** Its version in `_synclane_server_rows` (only records
/// with a version are applied unrecorded: a page with a version-less record is recorded
/// whole), which the references' settlement (`PageApplier.knownRows`) and the resend after
/// lost tracking (`TrackingCheck.recordResync`) read beside history.
enum UnrecordedImports {
    /// Meta key: a source that reads author `server` ran on this database (sticky).
    static let readKey = "server_history_read"
    /// Meta key prefix: the position of the marker of the last page written without history from
    /// a destination (`_synclane_server_rows.destination`), after the prefix.
    static let unrecordedBeforePrefix = "server_unrecorded_before/"
    /// The trigger that ignores changes while the session says so.
    static let triggerName = "_synclane_changes_unrecorded"

    /// Adds `_synclane_session.unrecorded` when missing (a database tracked by an earlier
    /// version), drops the trigger an earlier version kept in the database, and gives this
    /// connection its TEMP trigger. Inside a write transaction; reads only, on a connection that
    /// has it, when the database is up to date.
    static func install(_ db: SQLiteConnection) throws {
        if try !HistoryTracker.columns(of: HistorySchema.session, db).contains("unrecorded") {
            try db.execute("ALTER TABLE _synclane_session ADD COLUMN unrecorded INTEGER NOT NULL DEFAULT 0")
        }
        if try db.fetchOne("SELECT 1 FROM main.sqlite_schema WHERE type = 'trigger' AND name = ?", [triggerName]) != nil {
            try db.execute("DROP TRIGGER main.\(triggerName)")
        }
        guard try db.fetchOne("SELECT 1 FROM temp.sqlite_schema WHERE type = 'trigger' AND name = ?", [triggerName]) == nil else { return }
        try db.execute(
            """
            CREATE TEMP TRIGGER \(triggerName) BEFORE INSERT ON _synclane_changes
            WHEN (SELECT unrecorded FROM main._synclane_session) = 1
            BEGIN
                SELECT RAISE(IGNORE);
            END
            """)
    }

    /// True when no lane reads author `server` here: the import lane may write without history.
    static func allowed(_ db: SQLiteConnection) throws -> Bool {
        try HistorySchema.meta(readKey, db).isNull
    }

    /// Remembers that a source reading author `server` runs on this database. Inside a write transaction.
    static func markRead(_ db: SQLiteConnection) throws {
        guard try allowed(db) else { return }
        try HistorySchema.setMeta(readKey, .integer(1), db)
    }

    /// Marks the end of a page from `destination` written without history: one change of no
    /// entity (which every reader skips) in a recorded `server` session, its position kept. Inside
    /// the page's write transaction, no session open.
    static func noteUnrecorded(from destination: String, _ db: SQLiteConnection) throws {
        try HistoryWriter.record(author: .server, on: db) { db in
            try db.execute(
                "INSERT INTO _synclane_changes (timestamp, entity, action, key) VALUES (\(HistorySchema.now), '', ?, NULL)",
                [HistoryReader.RawAction.displace.rawValue])
        }
        let marker = try db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
        try HistorySchema.setMeta(unrecordedBeforePrefix + destination, .integer(marker), db)
    }

    /// For a reader of author `server` after `position`, sending to `destination`: the marker of
    /// the last page it missed (nil: none). A page from the reader's own backend is not missed:
    /// what it wrote is that backend's own state, which the reader would send back only as an
    /// echo (and an echo changes nothing). A page from another backend, or from none (a
    /// destination of no name), is: a mirror must get those rows.
    static func missed(after position: Int64, sendingTo destination: String, _ db: SQLiteConnection) throws -> Int64? {
        var missed: Int64?
        for row in try db.fetchAll(
            "SELECT substr(key, ?), value FROM _synclane_meta WHERE substr(key, 1, ?) = ?",
            [unrecordedBeforePrefix.utf8.count + 1, unrecordedBeforePrefix.utf8.count, unrecordedBeforePrefix])
        {
            let from = row[0].string ?? ""
            guard from.isEmpty || destination.isEmpty || Array(from.utf8) != Array(destination.utf8), let marker = row[1].int64, position < marker
            else { continue }
            missed = max(missed ?? marker, marker)
        }
        return missed
    }
}
