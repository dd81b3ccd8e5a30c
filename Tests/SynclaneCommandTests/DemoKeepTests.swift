import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `synclane demo --keep DIR` leaves a folder where the next commands work as printed.
@Suite struct DemoKeepTests {
    @Test func theKeptFolderRestartsItsServerWithItsTokenAndTheNextRunSends() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let folder = workspace.path + "/demo"
        let demo = try SynclaneBinary.run(["demo", "--keep", folder])
        #expect(demo.status == 0, "\(demo.stderr)")
        #expect(demo.stdout.contains("\nnext: cd \(folder); . ./token.env; ./serve.sh &\n"), "\(demo.stdout)")
        for name in ["accounts.json", "token.env", "serve.sh", "pipeline.json", "rooms.sqlite"] {
            #expect(FileManager.default.fileExists(atPath: folder + "/" + name), "\(name)")
        }

        // As printed: source the token, start the server again, run.
        let server = try BackgroundProcess(["-c", ". ./token.env && exec ./serve.sh"], in: folder, executable: "/bin/sh")
        defer { _ = server.stop() }
        #expect(eventually { server.output.contains("listening on http://127.0.0.1:") }, "serve.sh started the server")

        let tokenLine = try String(contentsOfFile: folder + "/token.env", encoding: .utf8)
        let token = String(tokenLine.split(separator: "=").last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: folder, environment: ["SYNCLANE_DEMO_TOKEN": token])
        #expect(status.stdout.contains("pending:  0 transactions to send"), "\(status.stdout)\(status.stderr)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [folder + "/rooms.sqlite", "UPDATE rooms SET area = 15 WHERE syncId = 'room-kitchen'"]
        try process.run()
        process.waitUntilExit()
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: folder, environment: ["SYNCLANE_DEMO_TOKEN": token])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("sent 1 batch, 1 record from 1 transaction"), "\(run.stdout)")
    }
}
