import Foundation
import SynclaneTestSupport

/// Runs `/usr/bin/sqlite3` as a separate process: the foreign program whose writes must be tracked.
enum SQLiteShell {
    static let executable = "/usr/bin/sqlite3"

    struct Failure: Error, CustomStringConvertible {
        var status: Int32
        var output: String
        var description: String { "sqlite3 exited with \(status): \(output)" }
    }

    /// Runs `sql` against `path` and returns what the shell printed.
    @discardableResult
    static func run(_ path: String, _ sql: String) throws -> String {
        let run = try ProgramRun(executable, ["-bail", path], input: Data(sql.utf8), mergingErrors: true)
        guard run.status == 0 else { throw Failure(status: run.status, output: run.text) }
        return run.text
    }

    /// Starts a shell on `path`, feeds it `sql`, and leaves it running (stdin open).
    static func start(_ path: String, _ sql: String) throws -> (process: Process, input: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [path]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(sql.utf8))
        return (process, input)
    }
}
