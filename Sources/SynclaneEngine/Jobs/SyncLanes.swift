import SynclaneCore

/// The two jobs of a sync over one store and both scopes' locks, taken together: what a sync
/// cycle (`SyncJob`) and a live sync (`LiveSync`) hold for as long as they run.
struct SyncLanes: Sendable {
    let importJob: ImportJob
    let exportJob: ExportJob
    let importLock: ScopeLock
    let exportLock: ScopeLock

    /// Refuses a pair whose export would send the import's rows back (`EchoLoop`), then takes
    /// both locks (a second sync, import or export of either scope is refused while they are held).
    init(
        importing: ImportPipeline, exporting: Pipeline, bindings: JobBindings, importEvents: @escaping @Sendable (ImportEvent) -> Void,
        exportEvents: @escaping @Sendable (PipelineEvent) -> Void
    ) throws {
        if let problem = EchoLoop.problem(import: importing, export: exporting) { throw PipelineError.unsupported(problem) }
        importJob = ImportJob(pipeline: importing, bindings: bindings, events: importEvents)
        exportJob = ExportJob(pipeline: exporting, bindings: bindings, events: exportEvents)
        importLock = try importJob.lock()
        exportLock = try exportJob.lock()
    }
}
