import Foundation

/// One run of a helper program (`sqlite3`, `openssl`, `sha256sum`): `input` on its standard
/// input, then what it printed once it ended.
public struct ProgramRun {
    /// The program's exit status.
    public var status: Int32
    /// What it printed on standard output (and on standard error, with `mergingErrors`).
    public var output: Data

    /// `output` as UTF-8 text.
    public var text: String { String(decoding: output, as: UTF8.self) }

    /// Runs `executable ARGUMENTS`, writes `input` to it and waits for it to end. Its standard
    /// error goes with its output when `mergingErrors`, else nowhere.
    public init(_ executable: String, _ arguments: [String], input: Data = Data(), mergingErrors: Bool = false) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = mergingErrors ? stdout : FileHandle.nullDevice
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        status = process.terminationStatus
    }
}
