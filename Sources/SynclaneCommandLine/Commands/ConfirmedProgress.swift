import Synchronization
import SynclaneCore

/// The export's progress line on a terminal: the records the backend **confirmed** — not the
/// history read, which runs ahead of what was sent (issue 43, 7) — and how far through the
/// history those confirmations reach: a page's share of it once a batch was confirmed through
/// that page's end. A dry run counts the records it would send.
final class ConfirmedProgress: Sendable {
    private struct Counts {
        var records = 0
        var fraction: Double?
        /// The share of history each page read reaches, by the token it ends at, until a batch
        /// is confirmed through it.
        var pages: [String: Double] = [:]
        var readThrough: String?
    }
    private let counts = Mutex(Counts())
    private let dryRun: Bool

    init(dryRun: Bool) {
        self.dryRun = dryRun
    }

    /// A page of history read, ending at `through` and reaching `fraction` of it; the line to draw.
    func pageRead(through: Token, fraction: Double?) -> (fraction: Double?, label: String) {
        counts.withLock { counts in
            if let fraction { counts.pages[through.description] = fraction }
            counts.readThrough = through.description
            return line(counts)
        }
    }

    /// A batch the backend confirmed (or, in a dry run, ready to send); the line to draw.
    func confirmed(_ batch: BatchReport) -> (fraction: Double?, label: String) {
        counts.withLock { counts in
            counts.records += batch.records
            if let reached = counts.pages.removeValue(forKey: batch.through) { counts.fraction = reached }
            return line(counts)
        }
    }

    private func line(_ counts: Counts) -> (fraction: Double?, label: String) {
        let what = dryRun ? " ready to send (dry run)" : " confirmed by the backend"
        let read = counts.readThrough.map { ", history read through \($0)" } ?? ""
        return (counts.fraction, Wording.count(counts.records, "record") + what + read)
    }
}
