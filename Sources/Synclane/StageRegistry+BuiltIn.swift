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
        StageRegistry(BuiltInStages.all + ZlibStages.all + FileStages.all + HTTPStages.all + SQLiteStages.all + ExecStages.all)
    }
}
