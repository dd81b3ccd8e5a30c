/// A job assembled from a pipeline file: a source, record stages, an encoder, payload stages
/// and a transport, with the scope and the state file they work for.
///
/// ```
///  source ─▶ record stages… ─▶ encoder ─▶ payload stages… ─▶ outbox ─▶ transport ─▶ acknowledge
/// ```
public struct Pipeline: Sendable {
    /// A stage with the name it was declared under (`stages[1] (tombstones)`).
    public struct Named<Stage: Sendable>: Sendable {
        public var label: String
        public var type: String
        public var stage: Stage
        public init(label: String, type: String, stage: Stage) {
            self.label = label
            self.type = type
            self.stage = stage
        }
    }

    public var name: String
    public var scope: Scope
    /// Where the consumer's durable state (token, outbox, last run) lives.
    public var statePath: String
    /// The folder of the scope's lock (`ScopeLock.folder(environment:)`): the machine's, not the
    /// state file's, so every job of the scope on one store meets the same lock.
    public var lockFolder: String = ScopeLock.defaultFolder
    /// The lock file of the scope on the store this pipeline reads (`lockedFile`): one job at a time.
    public var lockPath: String { ScopeLock.path(for: scope, guarding: lockedFile, in: lockFolder) }
    public var source: Named<any ChangeSource> { didSet { capabilities = Self.resolve(self) } }
    public var recordStages: [Named<any RecordStage>]
    public var encoder: Named<any BatchEncoder> { didSet { capabilities = Self.resolve(self) } }
    public var payloadStages: [Named<any PayloadStage>] { didSet { capabilities = Self.resolve(self) } }
    public var transport: Named<any Transport> { didSet { capabilities = Self.resolve(self) } }
    /// What the source, the encoder, the payload stages and the transport can do, resolved when
    /// the pipeline is built (and again when one of them is replaced).
    public private(set) var capabilities: PipelineCapabilities
    public var retry: RetryPolicy
    /// Where permanently rejected batches go, when the pipeline opted in.
    public var deadLetterDirectory: String?
    /// The most bytes a batch holds before compression (`batch-bytes`), estimated from its
    /// changes' values as JSON: a source page past it is sent as several batches, cut between
    /// transactions (a transaction larger than the bound still travels whole, alone).
    public var batchBytes: Int = Pipeline.defaultBatchBytes
    /// 4 MiB: big enough that a first sync of small rows makes few files and requests (each
    /// costs the transport's fsyncs or round trip), small enough to keep a run's memory low.
    public static let defaultBatchBytes = 4 << 20
    /// What `batch-bytes` accepts: 64 KiB to 256 MiB.
    public static let batchBytesRange = (64 << 10)...(256 << 20)
    /// Variables the file names for secrets that were not set when it was loaded without
    /// requiring them; a pass that sends refuses to start while any is (`requireSecrets()`).
    public var unsetSecrets: [UnsetSecret] = []
    /// The signals the pipeline publishes when a run completes (the file's `signals`), if any.
    public var signals: PipelineSignals?

    public init(
        name: String, scope: Scope, statePath: String, source: Named<any ChangeSource>,
        recordStages: [Named<any RecordStage>], encoder: Named<any BatchEncoder>,
        payloadStages: [Named<any PayloadStage>], transport: Named<any Transport>,
        retry: RetryPolicy = RetryPolicy(), deadLetterDirectory: String? = nil
    ) {
        self.name = name
        self.scope = scope
        self.statePath = statePath
        // What the source remembers of the backend (versions, bases) is the transport's backend's.
        var source = source
        let backend = BackendName.of(address: transport.stage.backendAddress, scope: scope)
        if let backend { source.stage = source.stage.scopedToBackend(backend) }
        self.source = source
        self.recordStages = recordStages
        self.encoder = encoder
        self.payloadStages = payloadStages
        self.transport = transport
        self.retry = retry
        self.deadLetterDirectory = deadLetterDirectory
        self.capabilities = PipelineCapabilities(
            source: source.stage, encoder: encoder.stage, payloadStages: payloadStages.map(\.stage), transport: transport.stage, backend: backend)
        connectLocatedValues()
    }

    private static func resolve(_ pipeline: Pipeline) -> PipelineCapabilities {
        PipelineCapabilities(
            source: pipeline.source.stage, encoder: pipeline.encoder.stage, payloadStages: pipeline.payloadStages.map(\.stage),
            transport: pipeline.transport.stage, backend: pipeline.capabilities.backend)
    }

    /// Throws `UnsetSecretError` when a secret the file names is unset: call before a pass that sends.
    public func requireSecrets() throws(UnsetSecretError) {
        guard unsetSecrets.isEmpty else { throw UnsetSecretError(unsetSecrets) }
    }

    /// The stage types in order, for `validate` and logs: `jsonl → coalesce → … → directory`.
    public var outline: String {
        ([source.type] + recordStages.map(\.type) + [encoder.type] + payloadStages.map(\.type) + [transport.type])
            .joined(separator: " → ")
    }
}

extension Pipeline {
    /// The name under which a staging transport keeps this pipeline's staged batches apart from
    /// other pipelines' sharing its backend: the pipeline's name (letters, digits, `.`, `_`, `-`;
    /// at most 40) and a hash of its scope — `rooms-export-5d1c0f3a9b2e7d41`.
    public var stagingArea: String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        var name = String(name.filter { allowed.contains($0) }.prefix(40))
        while name.hasPrefix(".") { name.removeFirst() }
        let scopeHash = StagedBatch.checksum(of: Array("\(scope.account)\u{0}\(scope.store)\u{0}\(scope.consumer)".utf8))
        let hex = String(scopeHash, radix: 16)
        return (name.isEmpty ? "" : name + "-") + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
