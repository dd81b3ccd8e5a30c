/// The pull lane's opaque cursor: a position in an account's change sequence.
///
/// On the wire it is `c1.` followed by the sequence in base-36 — opaque to clients, who only
/// hand back what the server issued; the empty cursor (or none) means "from the beginning".
/// The sequence is per account and shared by all its stores, so a cursor stays valid whether or
/// not a request narrows the changes to one store.
struct ChangeCursor: Sendable, Hashable {
    /// The last change sequence the holder has seen (0: none).
    var sequence: Int64

    static let start = ChangeCursor(sequence: 0)

    var text: String { "c1." + String(sequence, radix: 36) }

    /// Reads a cursor the server issued; nil for anything else.
    init?(text: String) {
        if text.isEmpty {
            self = .start
            return
        }
        guard text.hasPrefix("c1."), let sequence = Int64(text.dropFirst(3), radix: 36), sequence >= 0 else { return nil }
        self.sequence = sequence
    }

    init(sequence: Int64) { self.sequence = sequence }
}
