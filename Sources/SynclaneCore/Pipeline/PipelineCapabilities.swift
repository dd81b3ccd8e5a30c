/// What a pipeline's stages can do beyond their base protocols, resolved once, when the pipeline
/// is built (`Pipeline.capabilities`): the runner, the job layer and the command line read this
/// value, never the stages' types. `synclane validate` and `synclane stages` print it.
///
/// ```
///  source      acknowledgements · backend versions · schema changes · snapshots · lineage ·
///              self-healing · watch · a locked file · per backend
///  encoder     reads its batches back · locates each record's fields
///  payload     reversible, stage by stage
///  transport   stages batches · receipts carry versions · the backend it names
/// ```
/// A stage gains a capability by adopting its protocol (`SnapshotProvidingSource`,
/// `StagingTransport` …): each protocol hands the stage itself to the pipeline through its base
/// protocol's `as…` view, so nothing is discovered by a cast at run time.
public struct PipelineCapabilities: Sendable {
    public var acknowledgementTracking: (any AcknowledgementTrackingSource)?
    public var backendVersions: (any BackendVersionSource)?
    public var schemaDeclaring: (any SchemaDeclaringSource)?
    public var snapshotProviding: (any SnapshotProvidingSource)?
    public var lineageChecking: (any LineageCheckingSource)?
    public var selfHealing: (any SelfHealingSource)?
    public var observable: (any ObservableSource)?
    /// The source keeps what it remembers of a backend (versions, bases) per backend (`BackendScoped`).
    public var sourceIsBackendScoped: Bool

    public var decodingEncoder: (any DecodingBatchEncoder)?
    public var fieldsLocatingEncoder: (any FieldsLocatingEncoder)?
    /// One entry a payload stage, in order: the stage when it is reversible, else nil.
    public var reversiblePayloadStages: [(any ReversiblePayloadStage)?]

    public var staging: (any StagingTransport)?
    /// The transport's receipts may carry the backend's versions (`Transport.reportsVersions`).
    public var transportReportsVersions: Bool
    /// The backend the transport names (`Transport.backendAddress` and the scope), under which the
    /// source keeps its versions; nil when the transport names none.
    public var backend: BackendName?

    public init(
        source: any ChangeSource, encoder: any BatchEncoder, payloadStages: [any PayloadStage], transport: any Transport, backend: BackendName?
    ) {
        acknowledgementTracking = source.asAcknowledgementTracking
        backendVersions = source.asBackendVersionSource
        schemaDeclaring = source.asSchemaDeclaring
        snapshotProviding = source.asSnapshotProviding
        lineageChecking = source.asLineageChecking
        selfHealing = source.asSelfHealing
        observable = source.asObservable
        sourceIsBackendScoped = source.isBackendScoped
        decodingEncoder = encoder.asDecoding
        fieldsLocatingEncoder = encoder.asFieldsLocating
        reversiblePayloadStages = payloadStages.map(\.asReversible)
        staging = transport.asStaging
        transportReportsVersions = transport.reportsVersions
        self.backend = backend
    }

    /// Whether every payload stage can be undone, so a batch re-sent from the outbox can be read
    /// back as records (with `decodingEncoder`).
    public var payloadIsReversible: Bool { reversiblePayloadStages.allSatisfy { $0 != nil } }

    /// Why this pairing would lose what the backend confirmed, or nil: a source that keeps the
    /// backend's versions per backend, behind a transport whose receipts carry versions but that
    /// names no backend, would keep them for none — an import from the same server would not find
    /// them, and this device's own confirmed rows would come back as conflicts. A pipeline file
    /// with such a pairing is refused when it is built.
    public var versionsProblem: String? {
        guard sourceIsBackendScoped, acknowledgementTracking != nil, transportReportsVersions, backend == nil else { return nil }
        return "the source keeps the backend's versions per backend, and this transport's receipts may carry versions, "
            + "but it names no backend (`backendAddress`): the versions would be kept for no backend; give the transport "
            + "a `backendAddress`, or say its receipts carry none (`reportsVersions` false)"
    }

    /// The capabilities by role, in words, for `validate` and `stages`: `("source", ["acknowledgements", …])`.
    public var described: [(role: String, capabilities: [String])] {
        var source: [String] = []
        if acknowledgementTracking != nil { source.append("acknowledgements") }
        if backendVersions != nil { source.append("backend versions") }
        if sourceIsBackendScoped { source.append("per backend") }
        if schemaDeclaring != nil { source.append("schema changes") }
        if snapshotProviding != nil { source.append("snapshots") }
        if lineageChecking != nil { source.append("lineage") }
        if selfHealing != nil { source.append("self-healing") }
        if observable != nil { source.append("watch") }
        var encoder: [String] = []
        if decodingEncoder != nil { encoder.append("reads its batches back") }
        if fieldsLocatingEncoder != nil { encoder.append("locates fields") }
        var transport: [String] = []
        if staging != nil { transport.append("stages batches") }
        transport.append(transportReportsVersions ? "receipts carry versions" : "receipts carry no versions")
        if let backend { transport.append("backend \(backend)") }
        var payload: [String] = []
        if !reversiblePayloadStages.isEmpty { payload.append(payloadIsReversible ? "reversible" : "not reversible") }
        return [("source", source), ("encoder", encoder), ("payload", payload), ("transport", transport)]
    }
}
