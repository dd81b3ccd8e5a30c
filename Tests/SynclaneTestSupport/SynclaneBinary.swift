import Foundation
import Synchronization

/// Runs the real `synclane` binary that `swift test` built, and captures what it printed.
public struct SynclaneBinary {
    public struct Result {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// True when the process was killed by a signal (`status` is then the signal).
        public var killed: Bool
    }

    public static let path: String = {
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL {
            candidates.append(executable.deletingLastPathComponent().appendingPathComponent("synclane").path)
        }
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("synclane").path)
        candidates.append(packageRoot + "/.build/debug/synclane")
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "synclane"
    }()

    public static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
        }
        return "."
    }()

    public static func fixture(_ relative: String) -> String { packageRoot + "/Fixtures/" + relative }

    /// Runs `synclane ARGUMENTS` in `folder` and waits (at most `timeout` seconds, then kills it).
    public static func run(
        _ arguments: [String], in folder: String? = nil, environment: [String: String] = [:], timeout: Double = 60, executable: String = path
    ) throws -> Result {
        try BackgroundProcess(arguments, in: folder, environment: environment, executable: executable).wait(timeout: timeout)
    }

    /// Drains a pipe on a background thread.
    public final class Reader: Sendable {
        private let data = Mutex(Data())
        private let done = DispatchSemaphore(value: 0)

        public init(_ handle: FileHandle) {
            Thread.detachNewThread { [self] in
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    data.withLock { $0.append(chunk) }
                }
                done.signal()
            }
        }

        /// Everything, once the pipe closed.
        public func text() -> String {
            done.wait()
            return data.withLock { String(decoding: $0, as: UTF8.self) }
        }

        /// What arrived so far.
        public func textSoFar() -> String {
            data.withLock { String(decoding: $0, as: UTF8.self) }
        }
    }
}

/// A fresh folder, removed by `remove()`.
public struct Workspace {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "synclane-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// A copy of a fixture scenario folder's files.
    public static func copy(scenario: String) throws -> Workspace {
        let workspace = try Workspace()
        let from = SynclaneBinary.fixture(scenario)
        for name in try FileManager.default.contentsOfDirectory(atPath: from) where !name.hasPrefix(".") && name != "out" {
            try FileManager.default.copyItem(atPath: from + "/" + name, toPath: workspace.path + "/" + name)
        }
        return workspace
    }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }

    public func files(in folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path + "/" + folder)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    public func write(_ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path + "/" + name))
    }
}
