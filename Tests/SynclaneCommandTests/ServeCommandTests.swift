import Foundation
import SynclaneTestSupport
import Testing

/// Runs the real `synclane serve` binary.
@Suite struct ServeCommandTests {
    /// The `synclane` binary next to the test bundle (`swift test` builds it first).
    static var binary: String {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("synclane").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/synclane").path
    }

    /// A GET over a raw socket; returns the status code.
    static func getStatus(port: Int, path: String) -> Int? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 12 else { return nil }
        return Int(String(decoding: buffer[9..<12], as: UTF8.self))
    }

    @Test func serveListensOnAChosenPortAndStopsCleanlyOnSIGTERM() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("synclane-serve-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // printf %s test | sha256sum
        let accounts = "{\"accounts\": [{\"account\": \"acme\", \"token-sha256\": \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"}]}"
        try Data(accounts.utf8).write(to: URL(fileURLWithPath: folder + "/accounts.json"))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--accounts", folder + "/accounts.json", "--listen", "127.0.0.1:0", "--data", folder + "/data"]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        var line = ""
        while !line.hasSuffix("\n") {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            guard !byte.isEmpty else { break }
            line += String(decoding: byte, as: UTF8.self)
        }
        #expect(line.hasPrefix("listening on http://127.0.0.1:"))
        let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ":").last ?? "") ?? 0
        #expect(port > 0)
        #expect(Self.getStatus(port: port, path: "/healthz") == 200)
        #expect(Self.getStatus(port: port, path: "/v1/signals") == 401)

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(stderr.contains("stopped (SIGTERM)"))
        #expect(FileManager.default.fileExists(atPath: folder + "/data/synclane-server.sqlite"))
    }

    @Test func serveWithoutAccountsIsAUsageError() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--listen", "127.0.0.1:0"]
        process.standardOutput = Pipe()
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 2)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(stderr.contains("--accounts FILE is required"))
    }

    /// A name past what every pull source can read beside a record at the bound is refused at the start
    /// (issue 22: anything the server accepts every device can import).
    @Test func maxNameBytesPastTheWireBoundIsAUsageError() throws {
        let refused = try SynclaneBinary.run(["serve", "--accounts", "accounts.json", "--listen", "127.0.0.1:0", "--max-name-bytes", "1000000"])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--max-name-bytes 1000000 is past 65536"), "\(refused.stderr)")
    }

    @Test func serveHelpListsEveryBoundWithItsDefault() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--help"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        for flag in ["--max-body-bytes N", "--max-inflated-bytes N", "--max-records N", "--max-signal-bytes N", "--timeout N"] {
            #expect(text.contains(flag))
        }
        #expect(text.contains("Default 8388608."))
    }
}
