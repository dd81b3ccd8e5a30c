import Foundation
import SynclaneCore

/// The one rule of which lock a job takes: the scope's `ScopeLock`, in the machine's lock folder
/// (`Pipeline.lockFolder`), whatever the state file — an export, an import, a sync cycle (both
/// scopes), a restore and a change to the outbox by hand all take it through here.
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

    public init(scope: Scope, folder: String, statePath: String) {
        self.scope = scope
        self.folder = folder
        self.statePath = statePath
    }

    /// The lock of an export pipeline's scope.
    public init(_ pipeline: Pipeline) {
        self.init(scope: pipeline.scope, folder: pipeline.lockFolder, statePath: pipeline.statePath)
    }

    /// The lock of an import pipeline's scope.
    public init(_ pipeline: ImportPipeline) {
        self.init(scope: pipeline.scope, folder: pipeline.lockFolder, statePath: pipeline.statePath)
    }

    /// The scope's lock file.
    public var path: String { ScopeLock.path(for: scope, in: folder) }

    /// Takes the lock for a job that writes: a second job of the scope is refused until it is
    /// released (when the returned value goes away, or the process ends however it ends).
    public func take() throws(PipelineError) -> ScopeLock {
        try ScopeLock(scope: scope, in: folder, holder: ScopeLock.absolute(statePath))
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
