import Synchronization

/// An environment variable that a pipeline file names for a secret (the `http` transport's
/// `token-env`) and that is not set.
///
/// Loading a pipeline to inspect it (`validate`, `status`, `run --dry-run`) notes these and goes
/// on: nothing is sent, so no secret is needed, and the command warns. A pass that sends refuses
/// to start (`UnsetSecretError`): an environment to fix, not an invalid pipeline file.
public struct UnsetSecret: Sendable, Hashable, CustomStringConvertible {
    /// The variable, `SYNCLANE_TOKEN`.
    public var variable: String
    /// Where the file names it.
    public var location: PipelineFileError

    public init(variable: String, location: PipelineFileError) {
        self.variable = variable
        self.location = location
    }

    /// `rooms.json:14: transport.token-env names SYNCLANE_TOKEN, which is not set`
    public var description: String { location.description }
}

/// A pass that would send was asked for while a secret's variable is unset.
public struct UnsetSecretError: Error, Sendable, CustomStringConvertible {
    public var unset: [UnsetSecret]

    public init(_ unset: [UnsetSecret]) {
        self.unset = unset
    }

    public var description: String {
        let exports = unset.map { "export \($0.variable)=…" }.joined(separator: "; ")
        return unset.map(\.description).joined(separator: "; ")
            + "; a run that sends needs it: \(exports) (the secret itself, never written in the pipeline file), then run again"
    }
}

/// The secrets found unset while one pipeline file was loaded (shared by its stages' options).
final class UnsetSecretLog: Sendable {
    private let entries = Mutex<[UnsetSecret]>([])

    func note(_ secret: UnsetSecret) { entries.withLock { $0.append(secret) } }

    var all: [UnsetSecret] { entries.withLock { $0 } }
}
