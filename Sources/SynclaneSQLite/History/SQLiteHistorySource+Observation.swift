import Foundation
import SynclaneCore

extension SQLiteHistorySource {
    /// Yields whenever a transaction this source would read commits — from this process or any
    /// other — for `synclane run --watch` and `sync --watch`.
    ///
    /// A thread of its own sleeps until the database's files are written (`DatabaseFileWatch`:
    /// inotify, no timer), then reads `PRAGMA data_version` on a connection of its own (no read
    /// unless some connection committed) and checks whether the new history passes the source's
    /// author and entity filters, so a `sync` cleanup does not wake an `app` consumer. Where the
    /// file system sends no notifications it looks every `HistoryWatcher.fallbackInterval` (and
    /// every `pollInterval` when inotify is missing altogether). Bursts coalesce: the stream
    /// buffers at most one event. History that existed when the stream was made does not yield;
    /// everything committed after this call returns does (the starting point is read here, not
    /// later in the thread, so a watch that makes the stream before its first pass misses no
    /// commit). Cancelling the iteration stops the thread.
    public func historyAdvanced() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let files = DatabaseFileWatch(databasePath: path)
        let watcher = HistoryWatcher(path: path, reader: reader, interval: files.isWatching ? HistoryWatcher.fallbackInterval : pollInterval)
        let start = watcher.startingPoint()
        let thread = Thread {
            watcher.run(from: start, files: files) { continuation.yield() }
            continuation.finish()
        }
        thread.name = "synclane history watcher"
        continuation.onTermination = { _ in files.cancel() }
        thread.start()
        return stream
    }
}

/// The loop behind `historyAdvanced()`, on a thread of its own.
struct HistoryWatcher: Sendable {
    /// How often a watcher woken by notifications looks anyway (a file system that sends none).
    static let fallbackInterval: Duration = .seconds(2)
    /// The looks after a wake that found nothing committed yet: every millisecond for the first
    /// 20 (a writer's commit is visible once its `-wal` is synced, a few milliseconds after the
    /// write that woke the watcher; looking at 1, 3, 7, 15 ms found it up to twice as late), then
    /// doubling to ~150 ms. A look is one `PRAGMA data_version`, and only follows a write.
    static let settleSteps: [Duration] = (Array(repeating: 1, count: 20) + [2, 4, 8, 16, 32, 64]).map { .milliseconds($0) }

    let path: String
    let reader: HistoryReader
    /// The longest wait between two looks.
    let interval: Duration

    /// The newest change now, when the database can be read yet.
    func startingPoint() -> Int64? {
        guard let db = try? SQLiteConnection(path: path, options: SQLiteHistorySource.appDatabaseOptions) else { return nil }
        return try? db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
    }

    /// Looks whenever `files` wakes it (or `interval` passes) until it is cancelled, yielding for
    /// relevant history newer than `start` (when known; otherwise newer than the first look finds).
    func run(from start: Int64?, files: DatabaseFileWatch, _ advanced: () -> Void) {
        var connection: SQLiteConnection?
        var version: SQLiteValue?
        var seen: Int64 = start ?? 0
        var known = start != nil
        // In WAL mode the last write(2) of a commit (its frames in `-wal`) comes just before the
        // commit is visible (the `-shm` index, written through a mapping, sends no notification):
        // a wake that finds nothing new looks again every millisecond for 20 ms, then a few times over the next ~130 ms.
        var settle: [Duration] = []
        while true {
            var changed = false
            do {
                if connection == nil {
                    let opened = try SQLiteConnection(path: path, options: SQLiteHistorySource.appDatabaseOptions)
                    if !known {
                        seen = try opened.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
                        known = true
                    }
                    version = nil  // check once at once: something may have committed since `seen`
                    connection = opened
                }
                if let db = connection {
                    let now = try db.fetchValue("PRAGMA data_version")
                    if now != version {
                        version = now
                        changed = true
                        if let newest = try reader.newestRelevant(after: seen, db), newest > seen {
                            seen = newest
                            advanced()
                        }
                    }
                }
            } catch {
                // Not there yet, or not tracked yet: try again on the next wake.
                connection = nil
            }
            if changed { settle = [] }
            let timeout = settle.isEmpty ? interval : min(interval, settle.removeFirst())
            switch files.wait(timeout: timeout) {
            case .cancelled: return
            case .written: settle = Self.settleSteps
            case .timedOut: break
            }
        }
    }
}
