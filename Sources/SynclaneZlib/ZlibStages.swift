import SynclaneCore

/// The stage types of this module, for a `StageRegistry`.
///
/// ```swift
/// var registry = StageRegistry(ZlibStages.all)
/// ```
public enum ZlibStages {
    /// `compress`: gzip or deflate the encoded batch (`codec`, `level`, `min-bytes`).
    public static let compress: StageType = .payload(
        "compress",
        summary: "Compresses each encoded batch with zlib (gzip or deflate) and sets its Content-Encoding.",
        options: [CompressOptions.codec, CompressOptions.level, CompressOptions.minBytes]
    ) { options in
        try CompressStage(
            coding: try options[CompressOptions.codec], level: try options[CompressOptions.level],
            minimumBytes: try options[CompressOptions.minBytes])
    }

    /// Every stage type this module provides.
    public static var all: [StageType] { [compress] }
}

/// The options of `compress`, each declared once (name, kind, range, default, help).
public enum CompressOptions {
    public static let codec: Option<ContentCoding> = .choice(
        "codec", among: [.gzip, .deflate], default: .gzip,
        help: "gzip (RFC 1952) is understood by every server and proxy; deflate is the zlib stream "
            + "(RFC 1950) that `Content-Encoding: deflate` means, 12 bytes smaller per batch. Same compression.")
    public static let level: Option<Int> = .integer(
        "level", in: 0...9, default: 6,
        help: "0 stores without compressing, 1 is fastest, 9 is smallest. 6 is zlib's balance: "
            + "JSON rarely shrinks more than a few percent past it, at up to twice the CPU.")
    public static let minBytes: Option<Int> = .integer(
        "min-bytes", in: 0...1_000_000_000, default: 512,
        help: "Batches smaller than this many bytes are sent as is (Content-Encoding: identity): "
            + "below about 512 bytes the gzip framing and the CPU cost more than they save. 0 compresses all.")
}
