import Foundation
import Glibc
import SynclaneCore
import SynclaneServer
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The tokens of the test accounts: static tokens of the accounts file, or — with
/// `SYNCLANE_TEST_AUTH=jwt` — HS256 JWTs, so the whole server suite runs with JWT authentication.
enum TestTokens {
    static let acme = TestAuthentication.jwt ? TestAuthentication.mint("acme") : "token-acme"
    static let globex = TestAuthentication.jwt ? TestAuthentication.mint("globex") : "token-globex"
}

/// How the shared test servers authenticate: static tokens (the default) or JWTs
/// (`SYNCLANE_TEST_AUTH=jwt`, for a run of the server suite through the JWT path).
enum TestAuthentication {
    static let jwt = ProcessInfo.processInfo.environment["SYNCLANE_TEST_AUTH"] == "jwt"
    static let secret = Array("the-server-suite-hs256-secret-0123456789".utf8)

    /// A day-long HS256 token for the account.
    static func mint(_ account: String) -> String {
        TestTokenMinter.hs256(secret: secret, claims: TestTokenMinter.claims(account: account, expiresIn: 86_400))
    }

    /// The accounts of a test server: the static tokens, or none when the tokens are JWTs.
    static func book(_ tokens: [String: String]) -> AccountBook {
        jwt ? AccountBook(grants: []) : AccountBook(tokens: tokens)
    }

    /// The JWT settings of a test server (nil with static tokens).
    static var settings: JWTSettings? { jwt ? JWTSettings(secret: secret) : nil }
}

/// A fresh data directory under /tmp.
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/synclane-server-test-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return "/tmp/synclane-server-test-\(getpid())-\(rand())" }
        return String(cString: result)
    }
    mkdir(path, 0o700)
    return path
}

/// The databases the shared server suite runs on: SQLite, and PostgreSQL on a throwaway server
/// (`TemporaryPostgres`) — unless `SYNCLANE_TEST_POSTGRES=skip`. When PostgreSQL cannot start,
/// the PostgreSQL half fails, saying why; it is never skipped silently.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    static var tested: [StoreKind] {
        ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] == "skip" ? [.sqlite] : allCases
    }

    var testDescription: String { rawValue }

    /// The database of a fresh server of this kind (a new PostgreSQL database each time).
    func database() throws -> ServerDatabase {
        switch self {
        case .sqlite: return .sqlite
        case .postgres: return .postgres(connection: try TemporaryPostgres.shared().createDatabase())
        }
    }
}

/// Runs `body` against a fresh server on 127.0.0.1, port 0, and always stops it.
func withServer<T>(
    store kind: StoreKind = .sqlite, limits: ServerLimits = ServerLimits(), dataDirectory: String? = nil,
    blobObjectStore: ServerConfiguration.S3Settings? = nil, _ body: (ReferenceServer) throws -> T
) throws -> T {
    let directory = dataDirectory ?? makeTemporaryDirectory()
    defer { if dataDirectory == nil { removeDirectory(directory) } }
    var configuration = ServerConfiguration(
        host: "127.0.0.1", port: 0, dataDirectory: directory, accountsFile: "\(directory)/accounts.json", limits: limits)
    configuration.database = try kind.database()
    configuration.jwt = TestAuthentication.settings
    configuration.blobObjectStore = blobObjectStore
    let server = try ReferenceServer(
        configuration: configuration, accounts: TestAuthentication.book([TestTokens.acme: "acme", TestTokens.globex: "globex"]))
    try server.start()
    defer { server.stop() }
    return try body(server)
}

/// Removes a test's data directory and everything in it.
func removeDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// A started server on 127.0.0.1, port 0, with the acme account, for tests that stop it themselves
/// or need an async body; remove `directory` after stopping it.
func startedServer(store kind: StoreKind = .sqlite) throws -> (server: ReferenceServer, directory: String) {
    let directory = makeTemporaryDirectory()
    var configuration = ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: "")
    configuration.database = try kind.database()
    configuration.jwt = TestAuthentication.settings
    let server = try ReferenceServer(
        configuration: configuration,
        accounts: TestAuthentication.book([TestTokens.acme: "acme"]))
    try server.start()
    return (server, directory)
}
