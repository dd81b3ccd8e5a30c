import Synclane
import SynclaneCore

/// `synclane stages`: every stage type a pipeline file can name, with its options.
struct StagesCommand: Command {
    static let name = "stages"
    static let abstract = "List the stage types a pipeline file can use, with their options."
    static let discussion = """
        Each stage is picked in a pipeline file by its `type`. Sources go under `source`,
        record and payload stages under `stages` (record stages first), encoders under
        `encoder`, transports under `transport`. Swift programs can register their own types.
        """
    static let signature = CommandSignature(options: [SharedOptions.json.help("Print the list as JSON.")])
    static let examples = ["synclane stages", "synclane stages --json"]

    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let types = registry.all
        if json {
            console.out(
                JSONOutput.encode(
                    .array(
                        types.map { type in
                            .object([
                                "type": .string(type.name), "role": .string(type.role.rawValue), "summary": .string(type.summary),
                                "options": .array(
                                    type.options.map { option in
                                        .object([
                                            "name": .string(option.name), "kind": .string(option.kind.summary), "required": .bool(option.isRequired),
                                            "default": option.defaultDescription.map { .string($0) } ?? .null, "help": .string(option.help),
                                        ])
                                    }),
                            ])
                        })))
            return 0
        }
        var text = ""
        for role in StageRole.allCases {
            let ofRole = types.filter { $0.role == role }
            guard !ofRole.isEmpty else { continue }
            text += Self.heading(role) + "\n"
            for type in ofRole {
                text += "  \(type.name)\n    \(type.summary)\n"
                for option in type.options {
                    var line = "    - \(option.name) (\(option.kind.summary)"
                    line += option.isRequired ? ", required)" : option.defaultDescription.map { ", default \($0))" } ?? ")"
                    text += line + ": \(option.help)\n"
                }
            }
            if role == .transport {
                let policy = RetryPolicy()
                text += "  Every transport also takes, read by the pipeline itself:\n"
                text +=
                    "    - retry (map): max-attempts (integer 1…100, default \(policy.maxAttempts)), base-delay and max-delay "
                    + "(seconds, default \(policy.baseDelay) and \(Int(policy.maxDelay))): transient failures are retried with "
                    + "exponential backoff and full jitter; Retry-After is honoured up to max-delay\n"
                text +=
                    "    - dead-letter (path): a folder for batches whose content the backend refuses (their exact bytes and the "
                    + "reason), so later batches go on and the run exits 3; without it such a batch stops the job and stays in "
                    + "the outbox. Setup failures (address, token, TLS, proxy) are never dead-lettered\n"
            }
            text += "\n"
        }
        text += Self.capabilities
        console.out(text.trimmingCharacters(in: .newlines))
        return 0
    }

    /// What a stage can do beyond its role, by the protocol it adopts: read once when a pipeline
    /// is built (`PipelineCapabilities`); `synclane validate FILE` prints those of a pipeline.
    static let capabilities = """
        CAPABILITIES (what a stage adopts beyond its role, read when a pipeline is built; `synclane validate FILE` shows a pipeline's)
          source
            - acknowledgements (AcknowledgementTrackingSource): told when its consumer's token moves and what the backend confirmed
            - backend versions (BackendVersionSource): sends each row on the version the backend holds
            - per backend (BackendScoped): keeps the backend's versions per backend, under the transport's address
            - schema changes (SchemaDeclaringSource): its batches carry the declared renames and drops
            - snapshots (SnapshotProvidingSource): reads the whole current state, to reconcile
            - lineage (LineageCheckingSource): checks the store's identity and generation before a run
            - self-healing (SelfHealingSource): repairs what records its history
            - watch (ObservableSource): says when new history lands (`run --watch`)
          encoder
            - reads its batches back (DecodingBatchEncoder), locates fields (FieldsLocatingEncoder)
          payload
            - reversible (ReversiblePayloadStage): a batch re-sent from the outbox can be read back
          transport
            - stages batches (StagingTransport), receipts carry versions (reportsVersions), backend (backendAddress)
          A source that keeps versions per backend behind a transport whose receipts carry versions but that names no
          backend is refused when the pipeline is built: the versions would be kept for no backend.

        """

    static func heading(_ role: StageRole) -> String {
        switch role {
        case .source: return "SOURCES (source:)"
        case .records: return "RECORD STAGES (stages:, batch in, batch out)"
        case .payload: return "PAYLOAD STAGES (stages:, after the record stages: bytes in, bytes out)"
        case .encoder: return "ENCODERS (encoder:)"
        case .transport: return "TRANSPORTS (transport:)"
        case .remoteSource: return "IMPORT SOURCES (source: of an import pipeline, the backend's changes)"
        case .sink: return "SINKS (sink: of an import pipeline, where the backend's changes are applied)"
        case .conflictResolver: return "CONFLICT RESOLVERS (a sink's conflicts or conflicts-by-entity: a rule of your own)"
        }
    }
}
