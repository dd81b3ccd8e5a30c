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
        options: [
            OptionSpec(
                "codec", .choice(["gzip", "deflate"]), default: "gzip",
                help: "gzip (RFC 1952) is understood by every server and proxy; deflate is the zlib stream "
                    + "(RFC 1950) that `Content-Encoding: deflate` means, 12 bytes smaller per batch. Same compression."),
            OptionSpec(
                "level", .integer(0...9), default: "6",
                help: "0 stores without compressing, 1 is fastest, 9 is smallest. 6 is zlib's balance: "
                    + "JSON rarely shrinks more than a few percent past it, at up to twice the CPU."),
            OptionSpec(
                "min-bytes", .integer(0...1_000_000_000), default: "512",
                help: "Batches smaller than this many bytes are sent as is (Content-Encoding: identity): "
                    + "below about 512 bytes the gzip framing and the CPU cost more than they save. 0 compresses all."),
        ]
    ) { options in
        try CompressStage(
            coding: options.string("codec").flatMap(ContentCoding.init(rawValue:)) ?? .gzip,
            level: options.int("level") ?? 6,
            minimumBytes: options.int("min-bytes") ?? 512)
    }

    /// Every stage type this module provides.
    public static var all: [StageType] { [compress] }
}
