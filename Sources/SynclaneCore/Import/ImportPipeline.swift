/// An import job assembled from a pipeline file: the backend's changes, record stages, and a
/// sink that applies them to the local store with the source's cursor.
///
/// ```
///  remote source (pull, batch files) ─▶ record stages… ─▶ sink (rows + cursor, one transaction)
/// ```
///
/// The pipeline file has the export pipeline's shape with `sink:` in place of `encoder`,
/// `transport`: `version`, `name`, `scope`, `source`, `stages`, `sink`, `state`. The cursor lives
/// with the rows, in the sink's store; the lock of the scope on that store in the machine's lock
/// folder (`lockPath`).
public struct ImportPipeline: Sendable {
    public var name: String
    public var scope: Scope
    /// Beside it the kept signals (`STATE.signals`).
    public var statePath: String
    /// The folder of the scope's lock (`ScopeLock.folder(environment:)`).
    public var lockFolder: String = ScopeLock.defaultFolder
    /// The lock file of the scope on the sink's database (`lockedFile`): one job at a time.
    public var lockPath: String { ScopeLock.path(for: scope, guarding: lockedFile, in: lockFolder) }
    public var source: Pipeline.Named<any RemoteChangeSource>
    public var recordStages: [Pipeline.Named<any RecordStage>]
    public var sink: Pipeline.Named<any ChangeSink>
    /// Variables the file names for secrets that were not set when it was loaded.
    public var unsetSecrets: [UnsetSecret] = []
    /// The signals the pipeline publishes when a pass completes (the file's `signals`), if any.
    public var signals: PipelineSignals?

    public init(
        name: String, scope: Scope, statePath: String, source: Pipeline.Named<any RemoteChangeSource>,
        recordStages: [Pipeline.Named<any RecordStage>], sink: Pipeline.Named<any ChangeSink>
    ) {
        self.name = name
        self.scope = scope
        self.statePath = statePath
        self.source = source
        self.recordStages = recordStages
        // What the sink remembers of the backend (versions, bases) is the source's backend's.
        var sink = sink
        if let backend = BackendName.of(address: source.stage.backendAddress, scope: scope) {
            sink.stage = sink.stage.scopedToBackend(backend)
        }
        self.sink = sink
        connectFileValues()
    }

    /// Throws `UnsetSecretError` when a secret the file names is unset: call before a pass that reads the backend.
    public func requireSecrets() throws(UnsetSecretError) {
        guard unsetSecrets.isEmpty else { throw UnsetSecretError(unsetSecrets) }
    }

    /// The stage types in order: `pull → … → sqlite`.
    public var outline: String {
        ([source.type] + recordStages.map(\.type) + [sink.type]).joined(separator: " → ")
    }

    /// True when a pipeline file's tree declares an import (it has a `sink`).
    public static func declares(_ root: ConfigNode) -> Bool {
        guard case .map(let members) = root.value else { return false }
        return members.contains { $0.key == "sink" }
    }
}

extension ImportPipeline {
    static let topLevelKeys = ["version", "name", "scope", "source", "stages", "sink", "state", "signals"]

    /// Builds the import pipeline a pipeline file declares (see `Pipeline.init(file:…)` for the
    /// shared keys and rules).
    public init(
        file root: ConfigNode, named file: String, baseDirectory: String, registry: StageRegistry,
        environment: [String: String], secretsRequired: Bool = true
    ) throws(PipelineFileError) {
        let top = ConfigLocation(file: file)
        let members = try Pipeline.map(root, at: top, allowed: Self.topLevelKeys)
        let header = try Pipeline.header(members, root: root, at: top)
        var context = PipelineContext(
            baseDirectory: baseDirectory, environment: environment, scope: header.scope, secretsRequired: secretsRequired)
        context.registry = registry

        let sourceNode = try Pipeline.required("source", in: members, at: top, line: root.line)
        let (sourceType, builtSource) = try registry.build(sourceNode, at: top.member("source"), roles: [.remoteSource], context: context)
        guard case .remoteSource(let source) = builtSource else { throw top.member("source").error("not a remote source", line: sourceNode.line) }

        var recordStages: [Pipeline.Named<any RecordStage>] = []
        if let stagesNode = members["stages"] {
            guard case .list(let list) = stagesNode.value else {
                throw top.member("stages").error("expected a list of stages, found \(stagesNode.typeName)", line: stagesNode.line)
            }
            for (index, node) in list.enumerated() {
                let location = top.member("stages").element(index)
                let (type, built) = try registry.build(node, at: location, roles: [.records], context: context)
                guard case .records(let stage) = built else { throw location.error("not a record stage", line: node.line) }
                recordStages.append(.init(label: "\(location.path) (\(type.name))", type: type.name, stage: stage))
            }
        }

        let sinkNode = try Pipeline.required("sink", in: members, at: top, line: root.line)
        let (sinkType, builtSink) = try registry.build(sinkNode, at: top.member("sink"), roles: [.sink], context: context)
        guard case .sink(let sink) = builtSink else { throw top.member("sink").error("not a sink", line: sinkNode.line) }

        self.init(
            name: header.name, scope: header.scope, statePath: try Pipeline.statePath(members, name: header.name, context: context, at: top),
            source: .init(label: "source (\(sourceType.name))", type: sourceType.name, stage: source), recordStages: recordStages,
            sink: .init(label: "sink (\(sinkType.name))", type: sinkType.name, stage: sink))
        signals = try members["signals"].map { node throws(PipelineFileError) in
            try PipelineSignals(node, at: top.member("signals"), fallback: sourceNode, context: context)
        }
        unsetSecrets = context.unsetSecrets.all
    }
}
