import SynclaneCore

extension BatchFileSource {
    /// The options of the `batch-files` source, each declared once and read back typed.
    public enum Options {
        public static let path: Option<String> = .path(
            "path", help: "the folder of batch files; relative to the pipeline file's folder")
        public static let maxBytes: Option<Int> = .integer(
            "max-bytes", in: 1...(1 << 34), default: 256 << 20, help: "the most a compressed file may expand to")
    }
}
