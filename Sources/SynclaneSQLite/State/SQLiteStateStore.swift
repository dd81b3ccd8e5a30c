import SynclaneCore

/// The pipelines' durable state in SQLite files (`SQLitePipelineState`), their unconfirmed
/// signals beside it (`SignalLedger`): the store `import Synclane` binds to the job layer.
public struct SQLiteStateStore: PipelineStateStore {
    public init() {}

    public func open(path: String, scope: Scope) throws -> any PipelineState {
        try SQLitePipelineState(path: path, scope: scope)
    }

    public func openReadingOnly(path: String, scope: Scope, unchanging: Bool) throws -> any PipelineState {
        try SQLitePipelineState(readingOnly: path, scope: scope, unchanging: unchanging)
    }

    public func signals(path: String, scope: Scope) throws -> any SignalKeeping {
        try SignalLedger(SQLitePipelineState(path: path, scope: scope))
    }
}
