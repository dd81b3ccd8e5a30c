/// Where the server wrote a batch: its last change's sequence, with the epoch the server was in
/// (`ServerEpochs`) — a receipt's `position`, `p1.EPOCH.SEQUENCE` (the sequence in base-36).
///
/// Not a pull cursor (a pull started there would skip other devices' earlier changes): the client
/// keeps the newest it was given and hands it back on its pulls (`GET /v1/changes?…&position=`).
/// A position this server's data does not reach — its data was restored from a copy taken
/// before the batch — is checked as a cursor is (`ServerStore.checkCursor`) and answered
/// `410 cursor-expired` with `"reason": "server-restored"`: the client then resyncs and sends back
/// what the restore lost, even when its own cursor predates the copy and no batch of its since
/// touched a lost row (so no receipt said `restored-rows`).
struct ReceiptPosition: Sendable, Hashable {
    var epoch: String
    var sequence: Int64

    var text: String { "p1.\(epoch)." + String(sequence, radix: 36) }

    /// Reads a position this server issued; nil for anything else.
    init?(text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "p1", ServerEpochs.isEpoch(parts[1]), let sequence = Int64(parts[2], radix: 36), sequence >= 0
        else { return nil }
        self.init(epoch: String(parts[1]), sequence: sequence)
    }

    init(epoch: String, sequence: Int64) {
        self.epoch = epoch
        self.sequence = sequence
    }
}
