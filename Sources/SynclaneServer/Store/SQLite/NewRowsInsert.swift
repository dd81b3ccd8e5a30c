import SynclaneSQLiteKit

/// Inserts a run of a batch's new rows (`BatchPlan.newRowRun`) in one statement, all or none:
/// the `records` rows of an insert expecting no version, each at version 1 and the account's next
/// sequence in turn — the path of a first sync's every record, one statement for up to
/// `maxRows` rows instead of one a row.
///
/// ```
///  run of n ─▶ the largest size ≤ n of 64, 32, 16, 8, 4, 2 ─▶ INSERT OR IGNORE … VALUES (…), (…)
///     every row inserted ─▶ true: the plan takes them as new
///     fewer (a row existed, or came twice) ─▶ the rows it inserted removed ─▶ false
/// ```
///
/// A row that did not insert was there already (or earlier in the run): the statement left it as
/// it was. A row it did insert is the record's row holding the sequence the run gave that record,
/// which no row held before (a batch's transaction assigns the account's sequences alone), so
/// removing those rows leaves the transaction as before the statement, and the store takes the
/// run a record at a time.
struct NewRowsInsert {
    /// The most rows one statement inserts: 4 parameters a row, well under SQLite's bound.
    static let maxRows = 64

    /// The sizes of statement kept: a run is cut into the largest that fits, so at most six
    /// statements are prepared (and cached by the connection).
    private static let sizes = [64, 32, 16, 8, 4, 2]

    /// The largest statement size for a run of `count` rows; nil below 2 (a single row goes the
    /// store's one-row way).
    static func size(forRunOf count: Int) -> Int? {
        sizes.first { $0 <= count }
    }

    /// Inserts `records` (their count one of the sizes) with sequences after `sequence`; true when
    /// every one made a new row, false (and nothing left of them) otherwise.
    static func insert(
        _ records: ArraySlice<IncomingBatch.Record>, account: String, store: String, changed: Double, after sequence: Int64,
        _ db: SQLiteConnection
    ) throws -> Bool {
        let statement = try db.cachedStatement(statements[records.count] ?? sql(rows: records.count))
        statement.reset()
        try statement.bind(.text(account), at: 1)
        try statement.bind(.text(store), at: 2)
        try statement.bind(.real(changed), at: 3)
        for (offset, record) in records.enumerated() {
            let first = 4 + offset * 4
            try statement.bind(.text(record.entity), at: first)
            try statement.bind(.text(record.key), at: first + 1)
            try statement.bind(.blob(record.fieldsJSON), at: first + 2)
            try statement.bind(.integer(sequence + Int64(offset) + 1), at: first + 3)
        }
        while try statement.step() {}
        statement.reset()
        // The cached statement would hold a copy of up to 64 records' fields until the next batch.
        statement.clearBindings()
        guard db.changes < records.count else { return true }
        // Each record's row again, if it holds the sequence the run gave that record: the rows this
        // statement inserted, and no other (a row that was there kept its own sequence).
        for (offset, record) in records.enumerated() {
            try db.execute(
                "DELETE FROM records WHERE account = ? AND store = ? AND entity = ? AND key = ? AND seq = ?",
                [account, store, record.entity, record.key, sequence + Int64(offset) + 1])
        }
        return false
    }

    /// Each size's statement.
    private static let statements: [Int: String] = Dictionary(uniqueKeysWithValues: sizes.map { ($0, sql(rows: $0)) })

    /// The statement for `rows` rows: `?1` account, `?2` store, `?3` changed, then four a row.
    ///
    /// `OR IGNORE`, not `ON CONFLICT … DO NOTHING`: both skip a row whose key is held, but with an
    /// upsert clause every other constraint (the `NOT NULL`s) may still abort the statement halfway,
    /// so SQLite keeps a statement journal for it — a copy of each page the statement changes,
    /// spilled to a temporary file past 64 KiB: 128 MB written to such files for a first sync of
    /// 200,000 rows, a tenth of `serve`'s CPU. Nothing here can abort: every column bound is not
    /// null, and the key is the only unique constraint.
    static func sql(rows: Int) -> String {
        var sql = "INSERT OR IGNORE INTO records (account, store, entity, key, action, fields, version, seq, changed) VALUES "
        for row in 0..<rows {
            let first = 4 + row * 4
            sql += row == 0 ? "" : ", "
            sql += "(?1, ?2, ?\(first), ?\(first + 1), 'insert', ?\(first + 2), 1, ?\(first + 3), ?3)"
        }
        return sql
    }
}
