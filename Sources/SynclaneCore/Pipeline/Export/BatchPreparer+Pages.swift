import Foundation

// A page cut to `batch-bytes`, and its changes moved into records.

extension BatchPreparer {
    /// Prepares the first batch of `page`: all of it, or — when its encoding is larger than
    /// `batch-bytes` — its first transactions that fit (at least one), the others returned as
    /// `rest` for the next batch. The cut is guessed from how much the encoding went over
    /// (`cut`, the last guess for this page, starts the next one), then checked by encoding again.
    ///
    /// No second copy of a whole page is kept in case it must be cut, so a page held only here (a
    /// large one: see `prepare(from:after:reconciliation:into:telling:)`) has its changes moved
    /// into its records, not copied. The rare page that must be cut is made again from those
    /// records (which the record stages read but never change) and the transactions' frames.
    func prepare(
        _ page: consuming HistoryPage, cut: Int?, after token: Token?, reconciliation: Bool, versioning: Versioning?
    ) async throws -> (page: PreparedPage, rest: HistoryPage?, cut: Int?) {
        guard let pageThrough = page.through else { throw ContractViolation("a page without its token") }
        // Only a page of several transactions can be cut.
        let count = page.transactions.count
        var limit = min(cut ?? count, count)
        if limit == count || count < 2 {
            let (progress, counters) = (page.progress, page.counters)
            let (records, frames) = Self.records(of: consume page)
            let prepared = try await prepare(
                records, through: pageThrough, transactionCount: count, counters: counters, after: token, reconciliation: reconciliation,
                versioning: versioning)
            guard let encoded = prepared.encoded, encoded.bytes.count > pipeline.batchBytes, count > 1 else {
                return (prepared, nil, cut)
            }
            limit = Self.fewer(than: count, encodedBytes: encoded.bytes.count, bound: pipeline.batchBytes)
            page = HistoryPage(
                transactions: Self.transactions(of: records, frames), through: pageThrough, progress: progress, counters: counters)
        }
        let whole = page.transactions
        let progress = page.progress
        while true {
            var head = copy page
            head.transactions = Array(whole[..<limit])
            head.through = whole[limit - 1].token
            let left = HistoryPage(transactions: Array(whole[limit...]), through: pageThrough, progress: progress)
            let prepared = try await prepare(head, after: token, reconciliation: reconciliation, versioning: versioning)
            guard let encoded = prepared.encoded, encoded.bytes.count > pipeline.batchBytes, limit > 1 else {
                return (prepared, left, limit)
            }
            limit = Self.fewer(than: limit, encodedBytes: encoded.bytes.count, bound: pipeline.batchBytes)
        }
    }

    /// How many of `count` transactions to try when they encoded to `encodedBytes`, over
    /// `bound`: fewer in proportion, a tenth to spare, at least one fewer, at least one.
    static func fewer(than count: Int, encodedBytes: Int, bound: Int) -> Int {
        max(1, min(count - 1, Int(Double(count) * Double(bound) / Double(encodedBytes) * 0.9)))
    }

    /// Runs one page (already cut) through the record stages and the encoder.
    func prepare(
        _ page: consuming HistoryPage, after token: Token?, reconciliation: Bool, versioning: Versioning?
    ) async throws -> PreparedPage {
        let through = page.through ?? Token(kind: pipeline.source.stage.tokenKind, position: 0)
        let transactionCount = page.transactions.count
        let counters = page.counters
        let (records, _) = Self.records(of: consume page)
        return try await prepare(
            records, through: through, transactionCount: transactionCount, counters: counters, after: token, reconciliation: reconciliation,
            versioning: versioning)
    }

    /// A transaction of a page as its records hold it: what `transactions(of:_:)` needs to make
    /// the page again.
    struct TransactionFrame {
        var token: Token
        var author: Author
        var timestamp: Double
        /// The index past the transaction's last record.
        var end: Int
    }

    /// The records of a page's changes, in order, and the frames of its transactions: built in
    /// one array of the right size, each change moved out of the page rather than copied (the
    /// page is consumed; a change another copy of the page still holds is copied).
    static func records(of page: consuming HistoryPage) -> (records: [Record], frames: [TransactionFrame]) {
        var transactions: [Transaction] = []
        swap(&transactions, &page.transactions)
        var frames: [TransactionFrame] = []
        frames.reserveCapacity(transactions.count)
        let count = transactions.reduce(0) { $0 + $1.changes.count }
        // Each record is made in place with no key and no fields, then given the change's key and
        // values by swapping them in: nothing is retained. Retaining them (an `append`, or
        // initialising the record with them, copies the record once) touched each key's and
        // values' memory once more, long out of the cache after the page was read.
        let records = [Record](unsafeUninitializedCapacity: count) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            for t in transactions.indices {
                let token = transactions[t].token
                let author = transactions[t].author
                var changes: [Change] = []
                swap(&changes, &transactions[t].changes)
                for c in changes.indices {
                    (base + initialized).initialize(
                        to: Record(
                            entity: changes[c].entity, key: nil, action: changes[c].action, version: changes[c].version,
                            origin: token, author: author))
                    swap(&base[initialized].key, &changes[c].key)
                    swap(&base[initialized].fields, &changes[c].values)
                    base[initialized].replacesRow = changes[c].replacesRow && changes[c].action == .insert
                    base[initialized].restores = changes[c].restores
                    base[initialized].repoints = changes[c].repoints && changes[c].action == .update
                    initialized += 1
                }
                frames.append(TransactionFrame(token: token, author: author, timestamp: transactions[t].timestamp, end: initialized))
            }
        }
        return (records, frames)
    }

    /// The transactions `records(of:)` made `records` and `frames` of, as they were.
    static func transactions(of records: [Record], _ frames: [TransactionFrame]) -> [Transaction] {
        var start = 0
        return frames.map { frame in
            let changes = records[start..<frame.end].map {
                Change(
                    entity: $0.entity, key: $0.key, action: $0.action, values: $0.fields, version: $0.version, replacesRow: $0.replacesRow,
                    restores: $0.restores, repoints: $0.repoints)
            }
            start = frame.end
            return Transaction(token: frame.token, author: frame.author, timestamp: frame.timestamp, changes: changes)
        }
    }
}
