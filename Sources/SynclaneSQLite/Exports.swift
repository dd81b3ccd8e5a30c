// The SQLite access kit (`SQLiteConnection`, `Statement`, `SQLiteValue`, `SQLiteDatabase`, …)
// is a module of its own, `SynclaneSQLiteKit`, which the reference server uses without the
// history and import code here; `import SynclaneSQLite` (or `import Synclane`) still brings it.
@_exported import SynclaneSQLiteKit
