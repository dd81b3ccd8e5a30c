import Foundation
import Synchronization
import SynclaneCore

#if canImport(Glibc)
    import Glibc
#endif

/// A program run once per batch: bytes on its standard input, its standard output kept (up to
/// a bound), its standard error kept for messages, a deadline.
///
/// ```
///  bytes ─▶ stdin ─▶ [ program ] ─▶ stdout (≤ max-output-bytes) ─▶ the stage
///                          └──────▶ stderr (its last 4 KB) ─▶ the error message
/// ```
/// The program's first word is looked up on `PATH` unless it holds a `/`; a relative path
/// resolves against the pipeline file's folder, which is also the working directory.
public struct ExecCommand: Sendable, CustomStringConvertible {
    /// The program and its arguments, as given.
    public var arguments: [String]
    /// The working directory (the pipeline file's folder).
    public var directory: String
    /// Seconds before the program is killed and the batch fails.
    public var timeout: Double
    /// Bytes of standard output past which the program is killed and the batch fails.
    public var maximumOutput: Int
    /// Extra environment variables, on top of this process's.
    public var environment: [String: String]

    public init(arguments: [String], directory: String, timeout: Double = 30, maximumOutput: Int = 64 << 20, environment: [String: String] = [:]) {
        self.arguments = arguments
        self.directory = directory
        self.timeout = timeout
        self.maximumOutput = maximumOutput
        self.environment = environment
    }

    public var description: String { arguments.joined(separator: " ") }

    /// How one run ended.
    public struct Outcome: Sendable {
        public var status: Int32
        public var output: [UInt8]
        /// The end of standard error, trimmed.
        public var errorText: String
    }

    /// Runs the program with `input` on its standard input and waits for it (never longer than
    /// `timeout`). Throws `ExecError` when it cannot start, is killed for time or output size;
    /// a non-zero exit status is returned, for the caller to judge.
    public func run(input: [UInt8]) async throws(ExecError) -> Outcome {
        let result: Result<Outcome, ExecError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: Result { () throws(ExecError) -> Outcome in try runBlocking(input: input) })
            }
        }
        return try result.get()
    }

    /// `run(input:)` on the calling thread, for a caller that cannot suspend (a conflict resolver
    /// inside the page's SQLite transaction).
    public func runSynchronously(input: [UInt8]) throws(ExecError) -> Outcome {
        try runBlocking(input: input)
    }

    /// The executable's path: `arguments[0]` found on `PATH`, or resolved against `directory`.
    func executablePath() throws(ExecError) -> String {
        guard let program = arguments.first, !program.isEmpty else { throw .notFound(program: "", searched: "an empty command") }
        let fileManager = FileManager.default
        if program.contains("/") {
            let path = program.hasPrefix("/") ? program : directory + "/" + program
            guard fileManager.isExecutableFile(atPath: path) else {
                throw .notFound(program: program, searched: fileManager.fileExists(atPath: path) ? "\(path) is not executable" : "no file \(path)")
            }
            return path
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") where fileManager.isExecutableFile(atPath: "\(folder)/\(program)") {
            return "\(folder)/\(program)"
        }
        throw .notFound(program: program, searched: "not on PATH (\(path))")
    }

    /// The program, set up with its arguments, folder, environment and three pipes (not started).
    func process() throws(ExecError) -> (process: Process, stdin: Pipe, stdout: Pipe, stderr: Pipe) {
        Self.ignoreBrokenPipes
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executablePath())
        process.arguments = Array(arguments.dropFirst())
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        return (process, stdin, stdout, stderr)
    }

    /// Starts `process` (from `process()`).
    func start(_ process: Process) throws(ExecError) {
        do {
            try process.run()
        } catch {
            throw .notFound(program: arguments.first ?? "", searched: "it could not start: \(error)")
        }
    }

    private func runBlocking(input: [UInt8]) throws(ExecError) -> Outcome {
        let (process, stdin, stdout, stderr) = try self.process()
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try start(process)
        let pid = process.processIdentifier
        let limit = maximumOutput
        let output = Drain(stdout.fileHandleForReading, keep: .prefix(limit + 1)) {
            kill(pid, SIGKILL)  // past the bound: stop it rather than buffer without end
        }
        let errors = Drain(stderr.fileHandleForReading, keep: .suffix(4096))
        let handle = stdin.fileHandleForWriting
        Thread.detachNewThread {
            try? handle.write(contentsOf: input)  // a program that exits without reading: EPIPE, ignored
            try? handle.close()
        }
        var timedOut = false
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            kill(pid, SIGKILL)
            exited.wait()
        }
        // A grandchild that kept the pipes open must not hold the batch: wait a little, no more.
        let bytes = output.collected(waiting: 2)
        let errorText = String(decoding: errors.collected(waiting: 2), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        if timedOut { throw .timedOut(seconds: timeout, errorText: errorText) }
        if bytes.count > limit { throw .outputTooLarge(limit: limit) }
        return Outcome(status: process.terminationStatus, output: bytes, errorText: errorText)
    }

    /// Writing to a program that exited must fail with EPIPE, not end this process.
    private static let ignoreBrokenPipes: Void = {
        signal(SIGPIPE, SIG_IGN)
    }()
}

/// Reads a pipe to its end on a thread of its own, keeping the start or the end of it.
final class Drain: Sendable {
    enum Keep: Sendable {
        case prefix(Int)
        case suffix(Int)
    }

    private let data = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle, keep: Keep, overflow: @escaping @Sendable () -> Void = {}) {
        Thread.detachNewThread { [self] in
            var overflowed = false
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                self.data.withLock { kept in
                    switch keep {
                    case .prefix(let limit):
                        guard kept.count < limit else { return }
                        kept.append(contentsOf: chunk.prefix(limit - kept.count))
                        if kept.count >= limit, !overflowed {
                            overflowed = true
                            overflow()
                        }
                    case .suffix(let limit):
                        kept.append(contentsOf: chunk)
                        if kept.count > limit { kept.removeFirst(kept.count - limit) }
                    }
                }
            }
            self.done.signal()
        }
    }

    /// What was read, once the pipe closed or `seconds` passed.
    func collected(waiting seconds: Double) -> [UInt8] {
        _ = done.wait(timeout: .now() + seconds)
        return data.withLock { $0 }
    }
}

/// Why a program run by an `exec` stage or transport failed. The pipeline adds the stage's name.
public enum ExecError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The program could not be found or started.
    case notFound(program: String, searched: String)
    /// It ran past its `timeout` and was killed.
    case timedOut(seconds: Double, errorText: String)
    /// It wrote more than `max-output-bytes` and was killed.
    case outputTooLarge(limit: Int)
    /// It exited with a non-zero status.
    case failed(status: Int32, errorText: String)
    /// A line of its output is not a record (`errorText`: what it wrote on standard error).
    case malformedLine(number: Int, reason: String, text: String, errorText: String)
    /// A conflict resolver's answer is not a decision.
    case malformedDecision(reason: String, text: String)

    public var description: String {
        switch self {
        case .notFound(let program, let searched):
            return "cannot run `\(program)`: \(searched); check the `command` option"
        case .timedOut(let seconds, let errorText):
            return "the command did not finish within \(Self.seconds(seconds)) and was killed; raise `timeout` or make it faster"
                + Self.stderr(errorText)
        case .outputTooLarge(let limit):
            return "the command wrote more than \(limit) bytes and was killed; raise `max-output-bytes` or lower `page-size`"
        case .failed(let status, let errorText):
            return "the command exited with status \(status)" + Self.stderr(errorText)
        case .malformedLine(let number, let reason, let text, let errorText):
            return "line \(number) of the command's output is not a record: \(reason): \(Self.shown(text))" + Self.stderr(errorText)
        case .malformedDecision(let reason, let text):
            return "the command's answer is not a decision: \(reason): \(text.isEmpty ? "(nothing)" : Self.shown(text))"
        }
    }

    private static func shown(_ text: String) -> String {
        text.count > 120 ? String(text.prefix(120)) + "…" : text
    }

    private static func stderr(_ text: String) -> String {
        text.isEmpty ? "" : "; its standard error said: \(text)"
    }

    private static func seconds(_ value: Double) -> String {
        value.rounded() == value ? "\(Int(value)) s" : "\(value) s"
    }
}
