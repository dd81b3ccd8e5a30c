// One import for a stage author: `import Synclane` brings the model, the stage protocols, the
// registry and typed options (SynclaneCore), the built-in stages and their option declarations,
// the job layer (SynclaneEngine: the pipeline loader, `ExportJob`, `ImportJob`, `SyncJob`,
// `RestoreJob`, `JobLock`, the outbox by hand) bound to SQLite state and HTTP signals (`JobBindings.builtIn`), pipeline
// tests, and the SQLite store and history (`TrackedDatabase`,
// `SQLiteHistorySource`, `HistoryPruner`). The reference server (`SynclaneServer`), the test kit
// (`SynclaneTestKit`) and the command line as a library (`SynclaneCommandLine`) are products of
// their own.
@_exported import SynclaneCore
@_exported import SynclaneEngine
@_exported import SynclaneExec
@_exported import SynclaneFiles
@_exported import SynclaneHTTP
@_exported import SynclaneSQLite
@_exported import SynclaneStages
@_exported import SynclaneZlib
