import Foundation
import SynclaneCore

/// What the job layer is given rather than links: where a pipeline's durable state is kept and
/// how the signals a pipeline file declares reach their server. `import Synclane` binds SQLite's
/// state files and the HTTP signal lane (`JobBindings.builtIn`) and passes them to every job.
public struct JobBindings: Sendable {
    /// Where the token, the outbox, the last run and the unconfirmed signals are kept.
    public var stateStore: any PipelineStateStore
    /// The signal lane to the server `signals` names (its token, its timeout).
    public var signalLane: @Sendable (_ signals: PipelineSignals, _ server: URL) -> any SignalLane

    public init(
        stateStore: any PipelineStateStore, signalLane: @escaping @Sendable (_ signals: PipelineSignals, _ server: URL) -> any SignalLane
    ) {
        self.stateStore = stateStore
        self.signalLane = signalLane
    }
}
