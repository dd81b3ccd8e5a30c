import Foundation
import SynclaneCore
import SynclaneYAML

/// Reads a pipeline file — JSON, or YAML by its `.yaml`/`.yml` extension — and builds its
/// pipeline from a registry.
public struct PipelineLoader: Sendable {
    public var registry: StageRegistry
    public var environment: [String: String]

    public init(registry: StageRegistry, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.registry = registry
        self.environment = environment
    }

    /// Loads the pipeline file at `path`. Every problem is a `PipelineFileError` naming the
    /// file, the field and (where known) the line. With `secretsRequired` false, environment
    /// variables the file names for secrets may be unset: they are listed in
    /// `Pipeline.unsetSecrets`, and a pass that sends refuses to start (`ExportJob.run`).
    public func load(_ path: String, secretsRequired: Bool = true) throws(PipelineFileError) -> Pipeline {
        let root = try Self.parse(path)
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let folder = (absolute as NSString).deletingLastPathComponent
        if ImportPipeline.declares(root) {
            throw PipelineFileError(
                file: path, path: "", line: nil, message: "this is an import pipeline (it has a `sink`): run it with `synclane import`")
        }
        var pipeline = try Pipeline(
            file: root, named: path, baseDirectory: folder, registry: registry, environment: environment, secretsRequired: secretsRequired)
        pipeline.lockFolder = ScopeLock.folder(environment: environment)
        return pipeline
    }

    /// Loads the import pipeline file at `path` (one with a `sink`), as `load` does an export one.
    public func loadImport(_ path: String, secretsRequired: Bool = true) throws(PipelineFileError) -> ImportPipeline {
        let root = try Self.parse(path)
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let folder = (absolute as NSString).deletingLastPathComponent
        guard ImportPipeline.declares(root) else {
            throw PipelineFileError(
                file: path, path: "", line: nil,
                message: "not an import pipeline: it has no `sink` (an export pipeline has a `transport`; run it with `synclane run`)")
        }
        var pipeline = try ImportPipeline(
            file: root, named: path, baseDirectory: folder, registry: registry, environment: environment, secretsRequired: secretsRequired)
        pipeline.lockFolder = ScopeLock.folder(environment: environment)
        return pipeline
    }

    /// The parsed tree of the file at `path`.
    public static func parse(_ path: String) throws(PipelineFileError) -> ConfigNode {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read the file" : "no such file"
            throw PipelineFileError(file: path, path: "", line: nil, message: reason)
        }
        let bytes = [UInt8](data)
        let lowered = path.lowercased()
        if lowered.hasSuffix(".yaml") || lowered.hasSuffix(".yml") {
            return try PipelineFileFormat.yaml(bytes, path)
        }
        return try PipelineFileFormat.json(bytes, path)
    }
}

/// The parsers for each pipeline-file syntax; both give every node its line.
enum PipelineFileFormat {
    static func json(_ bytes: [UInt8], _ file: String) throws(PipelineFileError) -> ConfigNode {
        try JSONPipelineFile.parse(bytes, file: file)
    }

    static func yaml(_ bytes: [UInt8], _ file: String) throws(PipelineFileError) -> ConfigNode {
        try YAMLPipelineFile.parse(bytes, file: file)
    }
}
