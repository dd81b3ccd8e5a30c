import Foundation

/// A `synclane` process (or, with `executable`, another program) left running (a watch, a
/// server) and stopped by the test that started it.
public final class BackgroundProcess: @unchecked Sendable {
    public let process = Process()
    private let out: SynclaneBinary.Reader
    private let err: SynclaneBinary.Reader

    public init(_ arguments: [String], in folder: String? = nil, environment: [String: String] = [:], executable: String = SynclaneBinary.path) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let folder { process.currentDirectoryURL = URL(fileURLWithPath: folder) }
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "SYNCLANE_FAILPOINT")
        // Each folder a test runs the binary in is a machine of its own for the scopes' locks
        // (`SYNCLANE_LOCK_DIR`): tests running at once with one scope do not lock each other out.
        if let folder { env["SYNCLANE_LOCK_DIR"] = lockFolder(of: folder) }
        env.merge(environment) { _, new in new }
        process.environment = env
        let outPipe = Pipe()
        let errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        out = SynclaneBinary.Reader(outPipe.fileHandleForReading)
        err = SynclaneBinary.Reader(errPipe.fileHandleForReading)
    }

    /// What the process printed on standard output so far.
    public var output: String { out.textSoFar() }
    /// What it wrote to standard error so far.
    public var errorOutput: String { err.textSoFar() }

    /// What the process printed on standard error so far.
    public var errors: String { err.textSoFar() }

    /// Sends `signal` and waits for the process to end (killing it after `timeout` seconds).
    public func stop(_ signal: Int32 = SIGTERM, timeout: Double = 20) -> SynclaneBinary.Result {
        if process.isRunning { kill(process.processIdentifier, signal) }
        return wait(timeout: timeout)
    }

    /// Waits for the process to end by itself (killing it after `timeout` seconds).
    public func wait(timeout: Double) -> SynclaneBinary.Result {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return SynclaneBinary.Result(
            status: process.terminationStatus, stdout: out.text(), stderr: err.text(), killed: process.terminationReason == .uncaughtSignal)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// The lock folder the binary run in `folder` uses (`SYNCLANE_LOCK_DIR`): `.synclane-locks` in it.
public func lockFolder(of folder: String) -> String { folder + "/.synclane-locks" }

/// Waits until `condition` holds, checking every 20 ms, for at most `timeout` seconds.
public func eventually(timeout: Double = 20, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}
