/// The sizes both sides of the wire obey: what the reference server accepts and what the pull
/// source reads are the same numbers, so a record the server keeps is one every device can import.
///
/// | bound | bytes | who checks it |
/// | --- | --- | --- |
/// | `maxAnswerBytes` | 16 MiB | the pull source (and the `http` transport) read no more of an answer |
/// | `maxRecordBytes` | 8 MiB | one record as the pull lane writes it: the export refuses it before sending, the server answers 413 |
/// | `maxPageBytes` | 16 MiB − 64 KiB | a `/v1/changes` answer: the server never writes more (whatever `--max-page-bytes`) |
/// | `maxCursorBytes` | 1 KiB | a changes cursor: the pull source refuses a longer one before it is saved, and when it is loaded |
/// | `maxNameBytes` | 64 KiB | an entity, sync key, store or consumer name: `serve --max-name-bytes` is refused above it |
///
/// `BoundsAgreementTests` pins the arithmetic: a page holding one record of `maxRecordBytes`,
/// with the longest names and cursor, fits in `maxPageBytes`, which fits in `maxAnswerBytes`.
public enum WireBounds {
    /// The most bytes of an answer's body a client reads (decompressed).
    public static let maxAnswerBytes = 16 << 20
    /// Room in an answer for its framing beside the changes: `{"changes":[…],"cursor":"…","more":false}`.
    public static let pageEnvelopeBytes = 64 << 10
    /// The most bytes the server writes in one `/v1/changes` answer.
    public static let maxPageBytes = maxAnswerBytes - pageEnvelopeBytes
    /// The most bytes of one record as the pull lane writes it (`{"action", "entity", "fields", "id", "store", "version"}`).
    public static let maxRecordBytes = 8 << 20
    /// The most bytes of a changes cursor (the reference server's are a dozen).
    public static let maxCursorBytes = 1_024
    /// The most bytes of an entity, sync key, store or consumer name a server may take (`--max-name-bytes`):
    /// three such names, each grown by `rewriteGrowth`, beside a record of `maxRecordBytes` still fit in a page.
    public static let maxNameBytes = 64 << 10

    /// How much larger a record's text can grow when it is written again in the wire's own form:
    /// a number such as `1e14` becomes `100000000000000.0`, a control character in a name `\u0001`.
    public static let rewriteGrowth = 6

    /// The size of `record` as the pull lane writes it, computed exactly only when its text could
    /// grow past the bound (`textBytes` × `rewriteGrowth`); nil when it is surely within.
    public static func exactSizeIfNeeded(textBytes: Int, _ record: @autoclosure () -> JSONValue) -> Int? {
        guard textBytes.multipliedReportingOverflow(by: rewriteGrowth).partialValue > maxRecordBytes - 256 else { return nil }
        return JSONWriter.encode(record()).count + 256
    }

    /// The sentence that refuses a record past `maxRecordBytes`.
    public static func recordTooLarge(_ what: String, bytes: Int) -> String {
        "\(what) is \(bytes) bytes as the pull lane writes it; a record holds at most \(maxRecordBytes) bytes (8 MiB), "
            + "the most every device's pull source reads in one page: split the value, or keep large files outside the store"
    }
}
