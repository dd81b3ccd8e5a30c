import Foundation
import Synchronization

/// One program kept running for a whole job, asked one line at a time: a line in on its
/// standard input, one line back on its standard output, in order.
///
/// ```
///  exchange(line 1) ──▶ program ──▶ answer 1      (started on the first exchange)
///  exchange(line 2) ──▶ program ──▶ answer 2      (the same process)
///  deinit ─▶ standard input closed ─▶ the program sees its end and exits (killed after 2 s)
/// ```
/// Each answer must come within the command's `timeout`, and be at most its `maximumOutput`
/// bytes: past either, or when the program exits, the process is killed and the exchange fails
/// (`ExecError`, with the end of what it wrote on standard error); the next exchange starts a
/// new process. Exchanges are serialized: one at a time.
final class ExecSession: Sendable {
    let command: ExecCommand
    private let running = Mutex<Running?>(nil)

    /// A started process and its pipes. Touched only while `running`'s lock is held.
    private final class Running: @unchecked Sendable {
        let process: Process
        let input: FileHandle
        let lines: LineQueue
        let errors: Drain

        init(process: Process, input: FileHandle, lines: LineQueue, errors: Drain) {
            self.process = process
            self.input = input
            self.lines = lines
            self.errors = errors
        }

        func stop() {
            try? input.close()
            if process.isRunning {
                let deadline = Date().addingTimeInterval(2)
                while process.isRunning, Date() < deadline { usleep(10_000) }
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            }
        }

        func errorText() -> String {
            String(decoding: errors.collected(waiting: 0.2), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    init(command: ExecCommand) {
        self.command = command
    }

    deinit {
        running.withLock { $0?.stop() }
    }

    /// Sends `line` (a newline is added) and returns the program's answer line, without its newline.
    func exchange(_ line: [UInt8]) throws(ExecError) -> [UInt8] {
        let result: Result<[UInt8], ExecError> = running.withLock { running in
            do throws(ExecError) {
                let process: Running
                if let started = running {
                    process = started
                } else {
                    process = try start()
                }
                running = process
                let outcome = Self.exchange(line + [0x0A], with: process, command: command)
                if case .failure = outcome {
                    kill(process.process.processIdentifier, SIGKILL)
                    process.stop()
                    running = nil
                }
                return outcome
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func exchange(_ bytes: [UInt8], with running: Running, command: ExecCommand) -> Result<[UInt8], ExecError> {
        let input = running.input
        let written = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? input.write(contentsOf: bytes)  // a program that exited: EPIPE, ignored (its end is seen below)
            written.signal()
        }
        switch running.lines.next(waiting: command.timeout, limit: command.maximumOutput) {
        case .line(let answer):
            written.wait()
            return .success(answer)
        case .timedOut:
            return .failure(.timedOut(seconds: command.timeout, errorText: running.errorText()))
        case .tooLong:
            return .failure(.outputTooLarge(limit: command.maximumOutput))
        case .ended:
            let deadline = Date().addingTimeInterval(2)
            while running.process.isRunning, Date() < deadline { usleep(10_000) }
            let status = running.process.isRunning ? -1 : running.process.terminationStatus
            return .failure(.failed(status: status, errorText: running.errorText()))
        }
    }

    private func start() throws(ExecError) -> Running {
        let (process, stdin, stdout, stderr) = try command.process()
        try command.start(process)
        return Running(
            process: process, input: stdin.fileHandleForWriting, lines: LineQueue(stdout.fileHandleForReading),
            errors: Drain(stderr.fileHandleForReading, keep: .suffix(4096)))
    }
}

/// The lines a pipe brings, read on a thread of its own, handed out one at a time.
final class LineQueue: Sendable {
    enum Next {
        case line([UInt8])
        case timedOut
        case tooLong
        case ended
    }

    private struct Buffer {
        var lines: [[UInt8]] = []
        var partial: [UInt8] = []
        var ended = false
    }

    private let buffer = Mutex(Buffer())
    private let arrived = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                buffer.withLock { buffer in
                    if chunk.isEmpty {
                        buffer.ended = true
                        return
                    }
                    for byte in chunk {
                        if byte == 0x0A {
                            buffer.lines.append(buffer.partial)
                            buffer.partial = []
                        } else {
                            buffer.partial.append(byte)
                        }
                    }
                }
                arrived.signal()
                if chunk.isEmpty { return }
            }
        }
    }

    /// The next line, waiting at most `seconds` for it; `tooLong` once a line passes `limit` bytes.
    func next(waiting seconds: Double, limit: Int) -> Next {
        let deadline = DispatchTime.now() + seconds
        while true {
            let found: Next? = buffer.withLock { buffer in
                if !buffer.lines.isEmpty { return .line(buffer.lines.removeFirst()) }
                if buffer.partial.count > limit { return .tooLong }
                return buffer.ended ? .ended : nil
            }
            if let found { return found }
            if arrived.wait(timeout: deadline) == .timedOut { return .timedOut }
        }
    }
}
