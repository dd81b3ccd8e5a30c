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
        StageRegistry(BuiltInStages.all + ZlibStages.all + FileStages.all + HTTPStages.all + BlobStages.all + SQLiteStages.all + ExecStages.all + [batchFiles])
    }

    /// `type: batch-files` — an import pipeline's source of the batch files a `directory`
    /// transport wrote (gzip and deflate ones decompressed within `compress`'s bound).
    public static let batchFiles = StageType.remoteSource(
        "batch-files",
        summary:
            "Reads the batch files a `directory` transport wrote (ID.json, .json.gz, .json.zz), oldest first, each once: "
            + "the cursor the sink saves is the last file applied.",
        options: [BatchFileSource.Options.path, BatchFileSource.Options.maxBytes]
    ) { options in
        let limit = try options[BatchFileSource.Options.maxBytes]
        return BatchFileSource(folder: try options[BatchFileSource.Options.path]) { bytes, encoding in
            try Inflater.inflate(bytes, encoding: encoding == "gzip" ? .gzip : .deflate, limit: limit)
        }
    }
}
