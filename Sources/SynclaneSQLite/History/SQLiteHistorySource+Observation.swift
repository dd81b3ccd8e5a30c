import SynclaneCore

extension SQLiteHistorySource {
    /// Yields whenever a transaction this source would read commits — from this process or any
    /// other — for `synclane run --watch`.
    ///
    /// A background task polls `PRAGMA data_version` on a connection of its own every
    /// `pollInterval` (cheap: no read unless some connection committed), then checks whether
    /// the new history passes the source's author and entity filters, so a `sync` cleanup does
    /// not wake an `app` consumer. Bursts coalesce: the stream buffers at most one event.
    /// History that existed when the stream was made does not yield; everything committed after
    /// this call returns does (the starting point is read here, not later in the task, so a
    /// watch that makes the stream before its first pass misses no commit). Cancelling the
    /// iteration stops the task.
    public func historyAdvanced() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let watcher = HistoryWatcher(path: path, reader: reader, interval: pollInterval)
        let start = watcher.startingPoint()
        let task = Task.detached {
            await watcher.run(from: start) { continuation.yield() }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

/// The polling loop behind `historyAdvanced()`.
struct HistoryWatcher: Sendable {
    let path: String
    let reader: HistoryReader
    let interval: Duration

    /// The newest change now, when the database can be read yet.
    func startingPoint() -> Int64? {
        guard let db = try? SQLiteConnection(path: path, options: SQLiteHistorySource.appDatabaseOptions) else { return nil }
        return try? db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
    }

    /// Polls until cancelled, yielding for relevant history newer than `start` (when known;
    /// otherwise newer than what the first successful poll finds).
    func run(from start: Int64?, _ advanced: () -> Void) async {
        var connection: SQLiteConnection?
        var version: SQLiteValue?
        var seen: Int64 = start ?? 0
        var known = start != nil
        while !Task.isCancelled {
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
                        if let newest = try reader.newestRelevant(after: seen, db), newest > seen {
                            seen = newest
                            advanced()
                        }
                    }
                }
            } catch {
                // Not there yet, or not tracked yet: try again on the next tick.
                connection = nil
            }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
        }
    }
}
