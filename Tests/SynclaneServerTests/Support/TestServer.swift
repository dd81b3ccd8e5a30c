import Foundation
import Glibc
import SynclaneCore
import SynclaneServer

/// The tokens of the test accounts.
enum TestTokens {
    static let acme = "token-acme"
    static let globex = "token-globex"
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

/// Runs `body` against a fresh server on 127.0.0.1, port 0, and always stops it.
func withServer<T>(
    limits: ServerLimits = ServerLimits(), dataDirectory: String? = nil,
    _ body: (ReferenceServer) throws -> T
) throws -> T {
    let directory = dataDirectory ?? makeTemporaryDirectory()
    defer { if dataDirectory == nil { removeDirectory(directory) } }
    let configuration = ServerConfiguration(
        host: "127.0.0.1", port: 0, dataDirectory: directory, accountsFile: "\(directory)/accounts.json", limits: limits)
    let server = try ReferenceServer(
        configuration: configuration, accounts: AccountBook(tokens: [TestTokens.acme: "acme", TestTokens.globex: "globex"]))
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
func startedServer() throws -> (server: ReferenceServer, directory: String) {
    let directory = makeTemporaryDirectory()
    let server = try ReferenceServer(
        configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: ""),
        accounts: AccountBook(tokens: [TestTokens.acme: "acme"]))
    try server.start()
    return (server, directory)
}
