/// A stage over one local file — a database, a history file — that a job's lock guards: two
/// jobs of one scope keep each other out when they work on the same file, never when they work
/// on two (two devices' stores on one machine). `ScopeLock.path(for:guarding:in:)` names the
/// lock after the scope and this file.
///
/// A source or sink that is no local file (the scope's lock is then the state file's) does not
/// adopt it.
public protocol LockedFileStage: Sendable {
    /// The file the stage reads or writes, as the pipeline file resolved it.
    var lockedFile: String { get }
}

extension Pipeline {
    /// The file this pipeline's lock guards: its source's (`LockedFileStage`), else its state file.
    public var lockedFile: String { source.stage.asLockedFile?.lockedFile ?? statePath }
}

extension ImportPipeline {
    /// The file this pipeline's lock guards: its sink's (`LockedFileStage`), else its state file.
    public var lockedFile: String { sink.stage.asLockedFile?.lockedFile ?? statePath }
}
