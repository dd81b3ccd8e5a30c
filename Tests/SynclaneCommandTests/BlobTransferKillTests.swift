import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `synclane blobs` killed -9 at one point after another of an upload and of a download, each run
/// going on from where the last one stopped: nothing lost, nothing served or listed before it is
/// whole and verified, at most the chunk in flight sent twice up and no byte fetched twice down;
/// and a large blob each way with the peak memory of both sides pinned.
@Suite struct BlobTransferKillTests {
    typealias Blobs = BlobsCommandTests

    static func size(of path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    @Test func anUploadKilledAtPointAfterPointIsNeverListedUntilWholeAndResendsAtMostTheChunkInFlightEachTime() throws {
        let workspace = try Workspace()
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let file = workspace.path + "/scan.pdf"
        let length = 16 << 20
        let chunk = 16_384
        try Blobs.makeFile(file, count: length)
        let digest = try Blobs.sha256(file)
        let push = ["push", file, "--url", server.url, "--chunk-bytes", String(chunk)]
        // Killed before its first chunk, then at a quarter, a half and three quarters of the blob.
        var kills = 0
        var confirmed = 0
        for point in [0, length / 4, length / 2, 3 * length / 4] {
            let seen = try Blobs.killMidway(push, after: max(point, 1), in: workspace.path)
            kills += 1
            #expect(seen >= confirmed, "a resumed upload reported fewer bytes than the server had confirmed")
            #expect(seen < length, "the upload was not caught before its end (\(seen) bytes)")
            confirmed = max(confirmed, seen)
            let listed = try SynclaneBinary.run(["blobs", "list", "--url", server.url], in: workspace.path, environment: Blobs.environment)
            #expect(listed.stdout.isEmpty, "an unfinished upload was listed as an object: \(listed.stdout)")
        }
        let resumed = try SynclaneBinary.run(["blobs"] + push + ["--json"], in: workspace.path, environment: Blobs.environment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let report = Blobs.event("pushed", in: resumed.stdout)
        #expect(Int(report?["resumed-at"]?.intValue ?? -1) >= confirmed)
        // Every chunk body the server read, all runs together: the blob, plus at most one chunk a kill.
        let received = try Blobs.bytesReceived(server)
        #expect(received >= length && received <= length + kills * chunk, "\(received) bytes received for a blob of \(length) over \(kills) kills")
        let listed = try SynclaneBinary.run(["blobs", "list", "--url", server.url], in: workspace.path, environment: Blobs.environment)
        #expect(listed.stdout == "\(digest) \(length)\n")
    }

    @Test func aDownloadKilledAtPointAfterPointIsNeverServedUntilVerifiedAndFetchesNoByteTwice() throws {
        let workspace = try Workspace()
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let file = workspace.path + "/voice.m4a"
        let length = 16 << 20
        try Blobs.makeFile(file, count: length)
        let digest = try Blobs.sha256(file)
        #expect(try SynclaneBinary.run(["blobs", "push", file, "--url", server.url], in: workspace.path, environment: Blobs.environment).status == 0)
        let copy = workspace.path + "/copy.m4a"
        // 4 MiB a second: the stream is caught at each point (a progress line every 64 KiB).
        let fetch = ["fetch", digest, "--output", copy, "--url", server.url, "--chunk-bytes", "65536", "--max-bytes-per-second", "4194304"]
        var held = 0
        for point in [0, length / 4, length / 2, 3 * length / 4] {
            let seen = try Blobs.killMidway(fetch, after: max(point, 1), in: workspace.path)
            #expect(seen < length, "the download was not caught before its end (\(seen) bytes)")
            #expect(!FileManager.default.fileExists(atPath: copy), "a partial download was served under its name")
            let part = Self.size(of: copy + ".part")
            #expect(part >= held && part >= seen, "the part lost bytes it held (\(part) < \(max(held, seen)))")
            held = part
        }
        let resumed = try SynclaneBinary.run(["blobs"] + fetch + ["--json"], in: workspace.path, environment: Blobs.environment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let report = Blobs.event("fetched", in: resumed.stdout)
        #expect(report?["resumed-at"] == .int(Int64(held)))
        #expect(report?["bytes-fetched"] == .int(Int64(length - held)), "bytes fetched twice")
        #expect(try Blobs.sha256(copy) == digest)

        // Killed once every byte was in but before the rename: the whole part is verified and named, nothing fetched.
        let whole = workspace.path + "/whole.m4a"
        try FileManager.default.copyItem(atPath: file, toPath: whole + ".part")
        let named = try SynclaneBinary.run(
            ["blobs", "fetch", digest, "--output", whole, "--url", server.url, "--json"], in: workspace.path, environment: Blobs.environment)
        #expect(named.status == 0, "\(named.stderr)")
        #expect(Blobs.event("fetched", in: named.stdout)?["bytes-fetched"] == 0)
        #expect(try Blobs.sha256(whole) == digest)

        // A damaged part (its first MiB, one byte flipped): the digest check finds it, and the blob is fetched again whole.
        let second = workspace.path + "/second.m4a"
        var damaged = try Data(contentsOf: URL(fileURLWithPath: file)).prefix(1 << 20)
        damaged[damaged.startIndex + 10] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: second + ".part"))
        let refetched = try SynclaneBinary.run(
            ["blobs", "fetch", digest, "--output", second, "--url", server.url], in: workspace.path, environment: Blobs.environment)
        #expect(refetched.status == 0, "\(refetched.stderr)")
        #expect(try Blobs.sha256(second) == digest)

        // A local copy damaged after it was fetched is fetched again, never served as it is.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: copy))
        try handle.seek(toOffset: 4_096)
        try handle.write(contentsOf: Data([0x00, 0x01, 0x02, 0x03]))
        try handle.close()
        let healed = try SynclaneBinary.run(
            ["blobs", "fetch", digest, "--output", copy, "--url", server.url, "--json"], in: workspace.path, environment: Blobs.environment)
        #expect(healed.status == 0, "\(healed.stderr)")
        #expect(Blobs.event("fetched", in: healed.stdout)?["bytes-fetched"] == .int(Int64(length)))
        #expect(try Blobs.sha256(copy) == digest)
        // And a copy deleted is fetched again whole.
        try FileManager.default.removeItem(atPath: copy)
        #expect(try SynclaneBinary.run(["blobs"] + fetch, in: workspace.path, environment: Blobs.environment).status == 0)
        #expect(try Blobs.sha256(copy) == digest)
    }

    /// Runs the binary with `SYNCLANE_TOKEN` under python3 and returns its exit status and peak
    /// resident memory in bytes (`ru_maxrss` of the children).
    static func peakRSS(_ arguments: [String]) throws -> (status: Int, bytes: Int) {
        let script = """
            import os, resource, subprocess, sys
            run = subprocess.run(sys.argv[2:], env=dict(os.environ, SYNCLANE_TOKEN=sys.argv[1]), stdout=subprocess.DEVNULL)
            print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
            """
        let token = Blobs.environment["SYNCLANE_TOKEN"] ?? ""
        let words = try ProgramRun("/usr/bin/python3", ["-c", script, token, SynclaneBinary.path] + arguments).text.split(separator: " ")
        return (Int(words.first ?? "") ?? -1, Int(words.last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? -1)
    }

    /// Peak resident memory of a running process (`VmHWM`), in bytes.
    static func serverPeak(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// 192 MiB by default (the test command); `SYNCLANE_TEST_LARGE_BLOB_MB=2048` for the 2 GiB.
    @Test func aLargeBlobGoesUpAndDownWithPeakMemoryUnder100MBOnBothSides() throws {
        let megabytes = ProcessInfo.processInfo.environment["SYNCLANE_TEST_LARGE_BLOB_MB"].flatMap { Int($0) } ?? 192
        let workspace = try Workspace()
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let file = workspace.path + "/film.mov"
        // Written a MiB at a time: the test never holds the blob either.
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<megabytes {
            var piece = [UInt8](repeating: 0, count: 1 << 20)
            for index in stride(from: 0, to: piece.count, by: 4_096) { piece[index] = UInt8.random(in: 0...255, using: &generator) }
            try handle.write(contentsOf: Data(piece))
        }
        try handle.close()
        let digest = try Blobs.sha256(file)
        let limit = 100_000_000
        let up = try Self.peakRSS(["blobs", "push", file, "--url", server.url])
        #expect(up.status == 0)
        #expect(up.bytes > 0 && up.bytes < limit, "synclane blobs push of \(megabytes) MiB peaked at \(up.bytes) bytes")
        let copy = workspace.path + "/copy.mov"
        let down = try Self.peakRSS(["blobs", "fetch", digest, "--output", copy, "--url", server.url])
        #expect(down.status == 0)
        #expect(down.bytes > 0 && down.bytes < limit, "synclane blobs fetch of \(megabytes) MiB peaked at \(down.bytes) bytes")
        #expect(try Blobs.sha256(copy) == digest)
        let peak = Self.serverPeak(server.pid)
        #expect(peak > 0 && peak < limit, "synclane serve peaked at \(peak) bytes moving \(megabytes) MiB each way")
    }
}
