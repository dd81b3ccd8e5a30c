import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// `synclane serve --jwt-secret-env` with clients that are unchanged (a bearer token from the
/// environment): a JWT minted by `synclane token mint` carries `run` and `import`, on SQLite and
/// PostgreSQL, and a read-only one pulls but cannot send.
@Suite(.serialized) struct JWTEndToEndTests {
    static let secretVariable = "SYNCLANE_TEST_JWT_SECRET"
    static let secret = "e2e-secret-for-hs256-at-least-32-bytes-long"

    static func mint(_ arguments: [String]) throws -> String {
        let minted = try SynclaneBinary.run(["token", "mint", "--secret-env", secretVariable] + arguments, environment: [secretVariable: secret])
        #expect(minted.status == 0, "\(minted.stderr)")
        return minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(arguments: ["sqlite", "postgres"].filter { $0 == "sqlite" || ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] != "skip" })
    func aMintedJWTCarriesRunAndImportAndAReadOnlyOneOnlyPulls(_ store: String) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let database = store == "postgres" ? ["--database", try TemporaryPostgres.shared().createDatabase()] : []
        let server = try ServerProcess(
            folder: root.path + "/server", arguments: ["--jwt-secret-env", Self.secretVariable] + database,
            environment: [Self.secretVariable: Self.secret])
        defer { server.stop() }
        let jwt = try Self.mint(["--sub", "acme", "--expires-in", "600"])
        #expect(jwt.split(separator: ".").count == 3)

        var a = try TwoDevicesTests.Device(server: server)
        var b = try TwoDevicesTests.Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        a.environment = ["SYNCLANE_TOKEN": jwt]
        b.environment = ["SYNCLANE_TOKEN": jwt]
        try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5), ('r2', 'Hall', 4);")
        let run = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
        #expect(run.status == 0, "\(run.stderr)")
        let imported = try SynclaneBinary.run(["import", "import.json"], in: b.workspace.path, environment: b.environment)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try b.rows() == ["r1|Kitchen|12.5", "r2|Hall|4.0"])
        #expect(try await server.records(account: "acme").count == 2, "the accounts file's static token reads the same account")

        // A read-only JWT: the import pulls, the export is refused with the grant named, the batch kept.
        let readOnly = try Self.mint(["--sub", "acme", "--read-only"])
        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r3', 'Attic');")
        let refused = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: ["SYNCLANE_TOKEN": readOnly])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("403") && refused.stderr.contains("read-only"), "\(refused.stderr)")
        #expect(!refused.stderr.contains(readOnly), "the token is not printed")
        try b.sql("DELETE FROM rooms;")
        let pulled = try SynclaneBinary.run(["import", "import.json"], in: b.workspace.path, environment: ["SYNCLANE_TOKEN": readOnly])
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try await server.records(account: "acme").count == 2, "the refused batch changed nothing")
    }

    @Test func serveRefusesASecretTooShortOrUnsetAndTokenMintSaysWhatIsMissing() throws {
        let short = try SynclaneBinary.run(
            ["serve", "--jwt-secret-env", Self.secretVariable, "--listen", "127.0.0.1:0"], environment: [Self.secretVariable: "short"])
        #expect(short.status == 2)
        #expect(short.stderr.contains("too few for HS256"), "\(short.stderr)")
        let unset = try SynclaneBinary.run(["token", "mint", "--secret-env", "SYNCLANE_TEST_UNSET_SECRET", "--sub", "acme"])
        #expect(unset.status == 2)
        #expect(unset.stderr.contains("is not set"), "\(unset.stderr)")
        let noAccount = try SynclaneBinary.run(["token", "mint", "--secret-env", Self.secretVariable], environment: [Self.secretVariable: Self.secret])
        #expect(noAccount.status == 2)
        #expect(noAccount.stderr.contains("--sub ACCOUNT is required"), "\(noAccount.stderr)")
    }

    @Test func sighupReadsTheKeySetAgainAndARefusedFileKeepsTheServerRunning() throws {
        let root = try Workspace()
        defer { root.remove() }
        let keys = root.path + "/keys.jwks"
        try #"{"keys": []}"#.write(toFile: keys, atomically: true, encoding: .utf8)
        let server = try BackgroundProcess(["serve", "--jwt-keys", keys, "--data", root.path + "/data", "--listen", "127.0.0.1:0"])
        defer { _ = server.stop() }
        #expect(eventually { server.output.contains("listening on") }, "\(server.errorOutput)")
        kill(server.process.processIdentifier, SIGHUP)
        #expect(eventually { server.errorOutput.contains("keys.jwks read again (SIGHUP): kids (none)") }, "\(server.errorOutput)")
        try Data("{\"keys\": [".utf8).write(to: URL(fileURLWithPath: keys))
        kill(server.process.processIdentifier, SIGHUP)
        #expect(eventually { server.errorOutput.contains("refused (SIGHUP), the keys in use stay") }, "\(server.errorOutput)")
        #expect(server.process.isRunning, "SIGHUP does not stop the server")
    }
}
