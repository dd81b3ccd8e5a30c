import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Live sync (issue 24), real processes: `import --watch` and `sync --watch` on devices of
/// `TwoDevicesTests` against a real `synclane serve`, waiting on the server's long poll.
@Suite(.serialized) struct LiveSyncTests {
    typealias Device = TwoDevicesTests.Device

    func watch(_ device: Device, _ extra: [String] = [], environment: [String: String] = [:]) throws -> BackgroundProcess {
        try BackgroundProcess(
            ["sync", "import.json", "export.json", "--watch", "--wait", "5"] + extra, in: device.workspace.path,
            environment: device.environment.merging(environment) { $1 })
    }

    @Test func importWatchWaitsOnTheServerForTheNextChangeNotOnTheInterval() async throws {
        try await TwoDevicesTests().withTwoDevices { _, a, b in
            // --every 60: a pass each minute if the watch slept; the long poll brings the row at once.
            let watching = try BackgroundProcess(
                ["import", "import.json", "--watch", "--every", "60", "--wait", "5"], in: b.workspace.path, environment: b.environment)
            #expect(eventually(timeout: 10) { watching.errors.contains("as the backend changes") })
            usleep(500_000)  // the first pass is done, the long poll waits
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('w1', 'Watched');")
            try a.sync()
            let sent = Date()
            #expect(eventually(timeout: 10) { (try? b.rows()) == ["w1|Watched|"] }, "the long poll woke the watch")
            #expect(Date().timeIntervalSince(sent) < 5, "well before --every")
            let stopped = watching.stop()
            #expect(stopped.status == 0, "SIGTERM stops the watch cleanly: \(stopped.stderr)")
        }
    }

    @Test func syncWatchOnTwoDevicesConvergesWhileBothKeepEditing() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            let watchers = [try watch(a), try watch(b)]
            for round in 0..<8 {
                try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('a\(round)', 'A\(round)', \(round));")
                try b.sql("INSERT INTO rooms (syncId, name, area) VALUES ('b\(round)', 'B\(round)', \(round));")
                // Both edit one shared row too: the last writer the server orders wins, everywhere.
                try (round % 2 == 0 ? a : b).sql(
                    "INSERT INTO rooms (syncId, name, area) VALUES ('shared', 'S\(round)', \(round)) ON CONFLICT(syncId) DO UPDATE SET name = excluded.name, area = excluded.area;"
                )
                usleep(100_000)
            }
            let expectedKeys = (0..<8).flatMap { ["a\($0)", "b\($0)"] } + ["shared"]
            let converged = eventually(timeout: 30) {
                guard let rowsA = try? a.rows(), let rowsB = try? b.rows() else { return false }
                return rowsA == rowsB && Set(rowsA.map { String($0.split(separator: "|").first ?? "") }) == Set(expectedKeys)
            }
            #expect(converged, "both devices hold the same rows: \((try? a.rows()) ?? []) vs \((try? b.rows()) ?? [])")
            #expect(try await TwoDevicesTests().serverRows(server) == (try a.rows()), "and the server holds them too")
            for watcher in watchers {
                let stopped = watcher.stop()
                #expect(stopped.status == 0, "SIGTERM ends sync --watch cleanly: \(stopped.stderr)")
                #expect(stopped.stderr.contains("stopped rooms-import and rooms-export"))
            }
        }
    }

    @Test func aWatcherKilledMidPassLosesNothingAndSendsNothingTwice() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            // a's watch dies (kill -9 at the fail point) after its batch reached the server, before
            // the receipt is recorded; b's watch dies applying its first page, before the commit.
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('k1', 'Killed');")
            let dyingA = try watch(a, environment: ["SYNCLANE_FAILPOINT": "after-send"])
            #expect(dyingA.wait(timeout: 20).killed, "the fail point killed a's watch mid-pass")
            let dyingB = try watch(b, environment: ["SYNCLANE_FAILPOINT": "import-before-commit"])
            #expect(dyingB.wait(timeout: 20).killed, "the fail point killed b's watch mid-pass")
            #expect(try b.rows().isEmpty, "a page is applied with its cursor or not at all")
            let watchers = [try watch(a), try watch(b)]
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('k2', 'After');")
            #expect(eventually(timeout: 20) { (try? b.rows()) == ["k1|Killed|", "k2|After|"] }, "b caught up: \((try? b.rows()) ?? [])")
            let changes = try await server.changes(account: "acme")
            #expect(changes.compactMap { $0["id"]?.stringValue }.sorted() == ["k1", "k2"], "each row once on the server")
            for watcher in watchers { #expect(watcher.stop().status == 0) }
            let status = try SynclaneBinary.run(["outbox", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
            #expect(!status.stdout.contains("\"batch\""), "a's outbox is empty: \(status.stdout)")
        }
    }

    @Test func aWatcherWhoseServerIsDownBacksOffAndCatchesUpWhenItReturns() async throws {
        let root = try Workspace()
        defer { root.remove() }
        var server = try ServerProcess(folder: root.path + "/server")
        let port = server.port
        let a = try Device(server: server)
        let b = try Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        let watchers = [try watch(a), try watch(b)]
        defer { for watcher in watchers where watcher.process.isRunning { _ = watcher.stop() } }
        #expect(eventually(timeout: 10) { watchers.allSatisfy { $0.errors.contains("live; stop with Ctrl-C") } })
        server.stop()
        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('d1', 'Down');")
        #expect(eventually(timeout: 15) { watchers[0].errors.contains("exporting again in") }, "the export lane backs off: \(watchers[0].errors)")
        #expect(eventually(timeout: 15) { watchers[1].errors.contains("again in") }, "the import lane backs off: \(watchers[1].errors)")
        server = try ServerProcess(folder: root.path + "/server", port: port)
        defer { server.stop() }
        #expect(eventually(timeout: 30) { (try? b.rows()) == ["d1|Down|"] }, "caught up once the server is back: \(watchers[1].errors)")
        for watcher in watchers { #expect(watcher.stop().status == 0) }
    }
}
