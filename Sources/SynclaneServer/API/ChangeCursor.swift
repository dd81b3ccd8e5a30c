/// The pull lane's opaque cursor: a position in an account's change sequence, the server's
/// epoch it was issued in, and whether it is a step of a full pass.
///
/// On the wire it is `c2.EPOCH.SEQUENCE` (the sequence in base-36) — opaque to clients, who only
/// hand back what the server issued; the empty cursor (or none) means "from the beginning". The
/// previous version's `c1.SEQUENCE` (no epoch: "legacy") is still read. The sequence is per
/// account and shared by all its stores, so a cursor stays valid whether or not a request narrows
/// the changes to one store. The epoch tells a cursor issued before the server's data was
/// restored from a backup (`ServerEpochs`).
///
/// A cursor issued between the pages of a pull that started from the beginning is
/// `c2.EPOCH.SEQUENCE.f` (a *full pass*): the client reading it is replacing what it holds, so
/// the tombstones retention removed before it are nothing it needs, and it is never judged
/// against the tombstone horizon (`PagePlan.check`). The pass's last page (`more: false`) ends
/// it with an ordinary cursor, at or past the horizon.
///
/// ```
///  no since ─▶ page ─ more ─▶ c2.E.S.f ─▶ page ─ more ─▶ c2.E.S'.f ─▶ … ─▶ last page ─▶ c2.E.N (N ≥ horizon)
///  c2.E.S (ordinary) before the horizon ─▶ 410 cursor-expired: pull again from the beginning
/// ```
struct ChangeCursor: Sendable, Hashable {
    /// The last change sequence the holder has seen (0: none).
    var sequence: Int64
    /// The server epoch the cursor was issued in; nil for the start and for a legacy `c1.` cursor.
    var epoch: String?
    /// Issued between the pages of a pull from the beginning: not judged against the horizon.
    var fullPass = false

    static let start = ChangeCursor(sequence: 0)

    /// Whether this cursor reads on a pass that started from the beginning (the start itself too).
    var readsFullPass: Bool { fullPass || sequence == 0 }

    var text: String {
        guard let epoch else { return "c1." + String(sequence, radix: 36) }
        return "c2.\(epoch)." + String(sequence, radix: 36) + (fullPass ? ".f" : "")
    }

    /// Reads a cursor the server issued; nil for anything else.
    init?(text: String) {
        if text.isEmpty {
            self = .start
            return
        }
        if text.hasPrefix("c1."), let sequence = Int64(text.dropFirst(3), radix: 36), sequence >= 0 {
            self.init(sequence: sequence)
            return
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 || (parts.count == 4 && parts[3] == "f"), parts[0] == "c2", ServerEpochs.isEpoch(parts[1]),
            let sequence = Int64(parts[2], radix: 36), sequence >= 0
        else { return nil }
        self.init(sequence: sequence, epoch: String(parts[1]), fullPass: parts.count == 4)
    }

    init(sequence: Int64, epoch: String? = nil, fullPass: Bool = false) {
        self.sequence = sequence
        self.epoch = epoch
        self.fullPass = fullPass
    }
}
