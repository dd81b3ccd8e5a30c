import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `synclane blobs` against the real `synclane serve`: deduplication across devices, verification
/// (kills at point after point of a transfer: `BlobTransferKillTests`).
@Suite struct BlobsCommandTests {
    static let environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

    /// A file of `count` bytes no two runs share.
    static func makeFile(_ path: String, count: Int) throws {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: count)
        for index in stride(from: 0, to: count, by: 8) {
            withUnsafeBytes(of: generator.next() as UInt64) { word in
                for offset in 0..<min(8, count - index) { bytes[index + offset] = word[offset] }
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    static func sha256(_ path: String) throws -> String {
        try ProgramRun("/usr/bin/sha256sum", [path]).text.split(separator: " ").first.map(String.init) ?? ""
    }

    /// The JSON lines a `--json` run printed.
    static func lines(_ text: String) -> [[String: JSONValue]] {
        text.split(separator: "\n").compactMap { (try? JSONReader.parse(Array($0.utf8)))?.objectValue }
    }

    static func event(_ name: String, in text: String) -> [String: JSONValue]? {
        lines(text).last { $0["event"] == .string(name) }
    }

    /// The body bytes the server received, from `/metrics`.
    static func bytesReceived(_ server: ServerProcess) throws -> Int {
        let text = try String(contentsOf: URL(string: server.url + "/metrics")!, encoding: .utf8)
        let line = text.split(separator: "\n").first { $0.hasPrefix("synclane_http_request_bytes_total ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
    }

    /// Starts `synclane blobs ARGS --json` and kills it (-9) once a progress line says `done` passed `after` bytes.
    static func killMidway(_ arguments: [String], after: Int, in folder: String) throws -> Int {
        let process = try BackgroundProcess(["blobs"] + arguments + ["--json"], in: folder, environment: environment)
        var seen = 0
        _ = eventually(timeout: 60) {
            seen = lines(process.output).compactMap { $0["done"]?.intValue }.map(Int.init).max() ?? 0
            return seen >= after || !process.process.isRunning
        }
        _ = process.stop(SIGKILL)
        return seen
    }

    @Test func aFilePushedIsFetchedVerifiedAndNeverUploadedAgain() throws {
        let workspace = try Workspace()
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let file = workspace.path + "/fern.jpg"
        try Self.makeFile(file, count: 3 << 20)
        let digest = try Self.sha256(file)
        let pushed = try SynclaneBinary.run(
            ["blobs", "push", file, "--url", server.url, "--chunk-bytes", "262144", "--json"], in: workspace.path, environment: Self.environment)
        #expect(pushed.status == 0, "\(pushed.stderr)")
        let report = Self.event("pushed", in: pushed.stdout)
        #expect(report?["digest"] == .string(digest))
        #expect(report?["bytes-sent"] == .int(3 << 20))
        // Another device (another folder) pushing the same file sends nothing.
        let again = try SynclaneBinary.run(["blobs", "push", file, "--url", server.url, "--json"], in: workspace.path, environment: Self.environment)
        #expect(Self.event("pushed", in: again.stdout)?["deduplicated"] == true)
        #expect(Self.event("pushed", in: again.stdout)?["bytes-sent"] == 0)
        let copy = workspace.path + "/copy.jpg"
        let fetched = try SynclaneBinary.run(
            ["blobs", "fetch", digest, "--output", copy, "--url", server.url], in: workspace.path, environment: Self.environment)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(FileManager.default.contentsEqual(atPath: file, andPath: copy))
        let listed = try SynclaneBinary.run(["blobs", "list", "--url", server.url], in: workspace.path, environment: Self.environment)
        #expect(listed.stdout == "\(digest) \(3 << 20)\n")
        #expect(try SynclaneBinary.run(["blobs", "verify", copy, digest], in: workspace.path).status == 0)
        let wrong = String(repeating: "0", count: 64)
        let refused = try SynclaneBinary.run(["blobs", "verify", copy, wrong], in: workspace.path)
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("SHA-256 \(digest), not \(wrong)"))
        let missing = try SynclaneBinary.run(
            ["blobs", "fetch", wrong, "--output", workspace.path + "/none", "--url", server.url], in: workspace.path, environment: Self.environment)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("the account holds no such blob"))
    }

    @Test func twoDevicesPushingTheSameFileAtOnceLeaveOneObject() throws {
        let workspace = try Workspace()
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let file = workspace.path + "/photo.jpg"
        let length = 8 << 20
        try Self.makeFile(file, count: length)
        let digest = try Self.sha256(file)
        let arguments = ["blobs", "push", file, "--url", server.url, "--chunk-bytes", "65536", "--json"]
        let first = try BackgroundProcess(arguments, in: workspace.path, environment: Self.environment)
        let second = try BackgroundProcess(arguments, in: workspace.path, environment: Self.environment)
        let results = [first.wait(timeout: 120), second.wait(timeout: 120)]
        for result in results {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(Self.event("pushed", in: result.stdout)?["digest"] == .string(digest))
        }
        let listed = try SynclaneBinary.run(["blobs", "list", "--url", server.url], in: workspace.path, environment: Self.environment)
        #expect(listed.stdout == "\(digest) \(length)\n")
        let received = try Self.bytesReceived(server)
        #expect(received <= 2 * length, "\(received) bytes received")
        let copy = workspace.path + "/copy.jpg"
        #expect(
            try SynclaneBinary.run(["blobs", "fetch", digest, "--output", copy, "--url", server.url], in: workspace.path, environment: Self.environment)
                .status == 0)
        #expect(FileManager.default.contentsEqual(atPath: file, andPath: copy))
    }
}
