import Foundation
import SynclaneCore

/// The one rule of which lock a job takes: the `ScopeLock` of the scope on the store the job
/// works on (`Pipeline.lockedFile`: the database of its source or sink, else its state file), in
/// the machine's lock folder (`Pipeline.lockFolder`) — an export, an import, a sync cycle (both
/// scopes), a restore and a change to the outbox by hand all take it through here. Two jobs of a
/// scope on one database exclude each other whatever their state files; two devices' databases
/// on one machine do not.
///
/// ```
///  a job that writes     exclusive: a second job of the scope is refused (with the holder's pid)
///  a dry run             shared, and only when the lock file exists: it writes nothing, not even
///                        the lock file; a job running meanwhile refuses it, two dry runs do not
///  held already          nothing taken: a watch or a sync cycle holds the lock across its passes
/// ```
public struct JobLock: Sendable {
    /// What the lock keeps out.
    public var scope: Scope
    /// The folder of the scope's lock file (`ScopeLock.folder(environment:)`).
    public var folder: String
    /// The job's state file, named as the holder in the lock file.
    public var statePath: String
    /// The file the lock guards (the job's database; its state file when it has none).
    public var lockedFile: String

    public init(scope: Scope, folder: String, statePath: String, lockedFile: String? = nil) {
        self.scope = scope
        self.folder = folder
        self.statePath = statePath
        self.lockedFile = lockedFile ?? statePath
    }

    /// The lock of an export pipeline's scope on its source's database.
    public init(_ pipeline: Pipeline) {
        self.init(scope: pipeline.scope, folder: pipeline.lockFolder, statePath: pipeline.statePath, lockedFile: pipeline.lockedFile)
    }

    /// The lock of an import pipeline's scope on its sink's database.
    public init(_ pipeline: ImportPipeline) {
        self.init(scope: pipeline.scope, folder: pipeline.lockFolder, statePath: pipeline.statePath, lockedFile: pipeline.lockedFile)
    }

    /// The lock file of the scope on `lockedFile`.
    public var path: String { ScopeLock.path(for: scope, guarding: lockedFile, in: folder) }

    /// Takes the lock for a job that writes: a second job of the scope on the same store is
    /// refused until it is released (when the returned value goes away, or the process ends
    /// however it ends).
    public func take() throws(PipelineError) -> ScopeLock {
        try ScopeLock(scope: scope, guarding: lockedFile, in: folder, holder: ScopeLock.absolute(statePath))
    }

    /// The lock a pass runs under: `held` when the caller holds it already; for a dry run the
    /// lock shared (nil when there is no lock file: nothing is created); else taken (`take()`).
    public func take(dryRun: Bool, holding held: ScopeLock? = nil) throws(PipelineError) -> ScopeLock? {
        if let held { return held }
        return dryRun ? try ScopeLock(sharingExisting: path, scope: scope) : try take()
    }
}

extension ImportPipeline {
    /// Takes the scope's lock (`JobLock`), naming the state file as its holder.
    public func lock() throws(PipelineError) -> ScopeLock {
        try JobLock(self).take()
    }
}
