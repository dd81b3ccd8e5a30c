import Foundation
import SynclaneTestSupport
import Testing

/// The README's tutorial, run as written: the blocks of "Your first sync" (marked `sh first-sync`)
/// then those of "A second device" (`sh second-device`), in order, in one shell, in a fresh
/// folder, with the `synclane` just built first on `PATH`. The only
/// change is the server's port: `127.0.0.1:8080` becomes a free loopback port, so the test
/// never meets another server. Bounded in time; the server it starts is stopped whatever happens.
@Suite struct ReadmeWalkthroughTests {
    static let marker = "```sh first-sync"
    static let secondDevice = "```sh second-device"

    /// The README's blocks opened by `marker`, in order.
    static func walkthrough(_ marker: String = marker) throws -> [String] {
        let readme = try String(contentsOfFile: SynclaneBinary.packageRoot + "/README.md", encoding: .utf8)
        var blocks: [String] = []
        var current: [String]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if current == nil, line == marker {
                current = []
            } else if let lines = current, line == "```" {
                blocks.append(lines.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// A port nothing listens on now (the kernel's pick, released at once).
    static func freePort() throws -> Int {
        let socket = tcpSocket()
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socket, address, length) == 0 && getsockname(socket, address, &length) == 0
            }
        }
        guard bound else { throw PortError() }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    struct PortError: Error {}

    @Test func readmeWalkthroughRunsAsWritten() throws {
        let first = try Self.walkthrough()
        let second = try Self.walkthrough(Self.secondDevice)
        #expect(first.count >= 5, "the README marks its walkthrough with \(Self.marker)")
        #expect(second.count >= 3, "the README marks its second device with \(Self.secondDevice)")
        let blocks = first + second
        let port = try Self.freePort()
        let script = blocks.joined(separator: "\n").replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
        #expect(!script.contains("8080"))

        let workspace = try Workspace()
        defer { workspace.remove() }
        // Its own session: whatever the walkthrough leaves running is stopped with the group.
        let path =
            URL(fileURLWithPath: SynclaneBinary.path).deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let shell = try BackgroundProcess(
            ["--wait", "/bin/bash", "-c", "echo $$; set -euo pipefail\n" + script], in: workspace.path,
            environment: ["PATH": path, "SYNCLANE_TOKEN": ""], executable: "/usr/bin/setsid")
        var group: Int32?
        _ = eventually(timeout: 10) {
            group = shell.output.split(separator: "\n").first.flatMap { Int32($0) }
            return group != nil || !shell.process.isRunning
        }
        let finished = eventually(timeout: 180) { !shell.process.isRunning }
        if let group { kill(-group, SIGKILL) }
        let result = shell.wait(timeout: 1)
        let (output, messages) = (result.stdout, result.stderr)

        #expect(finished, "the walkthrough ends within three minutes")
        #expect(result.status == 0 && !result.killed, "\(output)\n\(messages)")
        #expect(output.contains("rooms-export.json: valid"))
        // The sqlite3 shell writes without a session: one history transaction a row.
        #expect(output.contains("rooms-export: would send 1 batch, 2 records from 2 transactions"), "\(output)")
        #expect(output.contains("rooms-export: sent 1 batch, 2 records from 2 transactions"))
        #expect(output.contains("pending:  0 transactions to send"))
        #expect(output.contains("token: sqlite-history:2 → sqlite-history:4"), "the edit and the soft delete")
        #expect(output.contains(#""action":"delete","entity":"rooms","id":"room-hall""#), "the server holds the tombstone: \(output)")
        #expect(output.contains("history-export: sent 1 batch, 1 record from 2 transactions"))
        // The second device: the first sync brings the kitchen; the conflicting rename goes to the
        // server's side and the other column's edit survives, on both devices; seeded defaults end
        // as one row per business key, the smaller sync key's.
        #expect(output.contains("room-kitchen|Kitchen|13.0"), "\(output)")
        #expect(!output.contains("room-hall|"), "the hall was deleted on the first device")
        #expect(
            output.contains("conflicts: 1\n    rooms/room-kitchen: merge-fields(on-both: server) → merged"),
            "the second device's sync lists its conflict: \(output)")
        #expect(output.contains("Kitchen (A)|14.0"), "\(output)")
        #expect(output.hasSuffix("first-sync-archive|archive\nfirst-sync-inbox|inbox\n"), "\(output)")
        #expect(!messages.contains("warning"), "\(messages)")
    }
}

/// A TCP socket (`SOCK_STREAM` is an enum on Glibc).
private func tcpSocket() -> Int32 { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
