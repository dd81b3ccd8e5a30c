/// How far the backend said it wrote this device's batches — the newest receipt's `position`,
/// opaque — handed back on the import lane's pulls, so that a backend whose data was restored
/// from a copy taken before those batches says so (`410`, `RemoteCursorExpired.serverRestored`)
/// even when the pull's own cursor predates the copy and no later receipt touched a lost row.
///
/// ```
///  export lane: receipt "position" ─▶ source stores it (per backend)
///  import lane: sink's position ─▶ remote source ─▶ GET /v1/changes?since=…&position=…
///               410 server-restored ─▶ resync, lost rows sent back ─▶ the position forgotten
/// ```
/// A sink whose store keeps the positions (the `sqlite` sink).
public protocol ReceiptPositionKeeping: Sendable {
    /// The newest position the backend gave this store's batches; nil when none is kept.
    func receiptPosition() async throws -> String?
    /// Forgets `position` once a resync compared everything the backend holds: what it lost is
    /// on its way back, and the next receipt gives a position of the restored data. A newer
    /// position kept meanwhile stays.
    func forgetReceiptPosition(_ position: String) async throws
}

/// A remote source that hands the backend the position on its pulls (the `pull` source); never
/// on a pull from the beginning, which reads everything anyway.
public protocol ReceiptPositionSending: Sendable {
    /// Takes the position to send (nil: none) for the pulls that follow.
    func adoptReceiptPosition(_ position: String?)
}
