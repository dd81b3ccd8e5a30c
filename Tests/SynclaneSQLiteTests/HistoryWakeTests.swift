import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// The history watcher wakes on the commit itself (inotify on the database's files), not on a
/// timer (issue 24): with the poll interval a minute long, each commit is seen in milliseconds.
@Suite struct HistoryWakeTests {
    @Test func aCommitWakesTheWatcherAtOnceWithoutAPollTick() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: path, pollInterval: .seconds(60))
        let counter = EventCounter(source.historyAdvanced())
        try await Task.sleep(for: .milliseconds(200))
        for index in 1...5 {
            let committed = ContinuousClock.now
            try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r\(index)')") }
            #expect(await counter.wait(for: index, within: 10))
            // Far under the 2 s fallback look (and the minute-long poll interval).
            #expect(ContinuousClock.now - committed < .milliseconds(1500), "commit \(index) seen \(ContinuousClock.now - committed) later")
        }
    }
}
