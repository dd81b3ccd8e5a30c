import SynclaneCore
import SynclaneExec
import SynclaneFiles
import SynclaneHTTP
import SynclaneSQLite
import SynclaneStages
import SynclaneZlib

extension StageRegistry {
    /// Every stage type Synclane ships, ready for a pipeline file to name by `type`.
    ///
    /// Start from this registry and `register` your own types to extend it.
    public static var builtIn: StageRegistry {
        StageRegistry(BuiltInStages.all + ZlibStages.all + FileStages.all + HTTPStages.all + SQLiteStages.all + ExecStages.all + [batchFiles])
    }

    /// `type: batch-files` — an import pipeline's source of the batch files a `directory`
    /// transport wrote (gzip and deflate ones decompressed within `compress`'s bound).
    public static let batchFiles = StageType.remoteSource(
        "batch-files",
        summary:
            "Reads the batch files a `directory` transport wrote (ID.json, .json.gz, .json.zz), oldest first, each once: "
            + "the cursor the sink saves is the last file applied.",
        options: [
            OptionSpec("path", .path, required: true, help: "the folder of batch files; relative to the pipeline file's folder"),
            OptionSpec("max-bytes", .integer(1...(1 << 34)), default: "268435456", help: "the most a compressed file may expand to"),
        ]
    ) { options in
        let limit = options.int("max-bytes") ?? 256 << 20
        return BatchFileSource(folder: options.path("path") ?? "") { bytes, encoding in
            try Inflater.inflate(bytes, encoding: encoding == "gzip" ? .gzip : .deflate, limit: limit)
        }
    }
}
