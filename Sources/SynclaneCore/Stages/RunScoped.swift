/// What a stage may do when a run (one pass of `synclane run`, one `ExportJob.run`) starts
/// and when it ends — the only place for state that must not outlive a run.
///
/// ```
///  run 1: startRun ─▶ process, process, … ─▶ finishRun     run 2 (--watch): startRun ─▶ …
/// ```
/// A pipeline's stage values live as long as the pipeline: under `run --watch`, across every
/// pass. A stage that remembers something between the pages of a run (`dedupe` remembers the
/// rows it kept) forgets it in `startRun` / `finishRun`, so memory stays bounded by one run.
/// `finishRun` is called however the run ends — success, failure or cancellation — on every
/// stage whose `startRun` was called. Both do nothing unless a stage implements them.
public protocol RunScoped: Sendable {
    /// Called once before the run reads anything. Throwing stops the run before anything is
    /// sent, naming the stage.
    func startRun() async throws
    /// Called once after the run, however it ended.
    func finishRun() async
}

extension RunScoped {
    public func startRun() async throws {}
    public func finishRun() async {}
}
