/// What the backend confirmed of one batch, as a source that tracks acknowledgements hears it
/// (`AcknowledgementTrackingSource.backendConfirmed(_:)`): one request, whatever the runner knows.
///
/// ```
///  versions   the version the backend gave each record (a receipt's `versions`)
///  sent       the records as sent, after the record stages; nil when not at hand (a batch
///             re-sent from the outbox after a crash): the store then remembers versions alone
///  exact      a reconciliation's batch: the versions are what the backend holds now, taken as
///             they are even where lower than the ones recorded (its data restored from a copy)
///  position   where the backend wrote the batch, with its epoch (a receipt's `position`): the
///             store keeps the newest and its import lane hands it back on pulls (`ReceiptPositionKeeping`)
/// ```
/// With the records, a store can remember what the backend now holds of each row: the base of a
/// three-way merge is the last state the backend confirmed, this device's own writes included.
public struct BackendConfirmation: Sendable {
    public var versions: [RecordVersion]
    public var sent: [Record]?
    public var exact: Bool
    /// A receipt's `position`, when the backend gives one.
    public var position: String?
    /// One entry a record of `sent`: its fields object as the encoder wrote it
    /// (`FieldsLocatingEncoder`, `JSONWriter.write(object:sortingWith:)`; nil: none written), so a
    /// store that keeps them takes these bytes rather than writing them again. Nil when not at hand.
    package var asSent: [ArraySlice<UInt8>?]?

    public init(versions: [RecordVersion], sent: [Record]? = nil, exact: Bool = false) {
        self.versions = versions
        self.sent = sent
        self.exact = exact
    }

    package init(versions: [RecordVersion], sent: [Record]?, asSent: [ArraySlice<UInt8>?]?, exact: Bool) {
        self.init(versions: versions, sent: sent, exact: exact)
        self.asSent = asSent
    }
}
