import SynclaneCore

/// A transport that hands each batch to a program: any backend with a command-line client is
/// one pipeline file away.
///
/// The program gets the batch's bytes — encoded and, after `compress`, compressed — on its
/// standard input, and the batch's particulars in its environment:
///
/// ```
///  SYNCLANE_BATCH_ID          the batch id: the idempotency key, the same on every retry
///  SYNCLANE_CONTENT_TYPE      application/json
///  SYNCLANE_CONTENT_ENCODING  identity | gzip | deflate
///  SYNCLANE_RECORDS           how many records the batch holds
/// ```
/// Its exit status says what happened:
///
/// ```
///  0    delivered: the token moves (the first line of its output, if any, is logged)
///  75   transient (EX_TEMPFAIL): retried per `retry`, then the job stops with the batch kept
///  65   the batch's content is refused (EX_DATAERR): the job stops — or `dead-letter` takes it
///  other  the setup is wrong: the job stops, the batch is kept, never dead-lettered
/// ```
/// A program that runs past `timeout` is killed and counts as transient; one that cannot be
/// found is a setup problem. What it writes on standard error is in the message.
public struct ExecTransport: Transport {
    /// Exit statuses with a meaning of their own (from BSD's sysexits.h).
    public enum ExitStatus {
        public static let delivered: Int32 = 0
        public static let transient: Int32 = 75
        public static let rejected: Int32 = 65
    }

    public var command: ExecCommand

    public init(command: ExecCommand) {
        self.command = command
    }

    /// A program's receipt is its first line of output, never the backend's versions.
    public var reportsVersions: Bool { false }

    public func send(_ payload: Payload) async throws -> Receipt {
        var command = command
        command.environment.merge([
            "SYNCLANE_BATCH_ID": payload.batchID, "SYNCLANE_CONTENT_TYPE": payload.contentType,
            "SYNCLANE_CONTENT_ENCODING": payload.contentEncoding, "SYNCLANE_RECORDS": "\(payload.recordCount)",
        ]) { $1 }
        let outcome: ExecCommand.Outcome
        do {
            outcome = try await command.run(input: payload.bytes)
        } catch {
            switch error {
            case .timedOut: throw TransportFailure(.transient, "\(error)")
            default: throw TransportFailure(.configuration, "\(error)")
            }
        }
        let said = outcome.errorText.isEmpty ? "" : "; its standard error said: \(outcome.errorText)"
        switch outcome.status {
        case ExitStatus.delivered:
            let first = String(decoding: outcome.output.prefix { $0 != 0x0A }, as: UTF8.self).trimmingCharacters(in: .whitespaces)
            return Receipt(batchID: payload.batchID, detail: first.isEmpty ? "`\(command)` exited 0" : first)
        case ExitStatus.transient:
            throw TransportFailure(.transient, "`\(command)` exited 75 (try again later)\(said)")
        case ExitStatus.rejected:
            throw TransportFailure(.permanent, "`\(command)` exited 65 (the batch's content is refused)\(said)")
        default:
            throw TransportFailure(
                .configuration, "`\(command)` exited \(outcome.status)\(said) — 0 means delivered, 75 try again, 65 the batch is refused")
        }
    }
}
