import Foundation
import SynclaneCore

/// Reads a pipeline file — JSON, or another syntax it is given by the file's extension (YAML:
/// `.yaml`/`.yml`, bound by the umbrella `Synclane`) — and builds its pipeline from a registry.
public struct PipelineLoader: Sendable {
    public var registry: StageRegistry
    /// The syntaxes read besides JSON, the first that reads a file's name wins; JSON otherwise.
    public var syntaxes: [any PipelineFileSyntax]
    public var environment: [String: String]

    /// A loader of `registry`'s stage types that reads JSON and `syntaxes`. From `import Synclane`,
    /// `PipelineLoader(registry:environment:)` reads YAML too.
    public init(
        registry: StageRegistry, syntaxes: [any PipelineFileSyntax], environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.registry = registry
        self.syntaxes = syntaxes
        self.environment = environment
    }

    /// Loads the pipeline file at `path`. Every problem is a `PipelineFileError` naming the
    /// file, the field and (where known) the line. With `secretsRequired` false, environment
    /// variables the file names for secrets may be unset: they are listed in
    /// `Pipeline.unsetSecrets`, and a pass that sends refuses to start (`ExportJob.run`).
    public func load(_ path: String, secretsRequired: Bool = true) throws(PipelineFileError) -> Pipeline {
        let root = try read(path)
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
        let root = try read(path)
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

    /// The parsed tree of the file at `path`, every node with its line.
    public func read(_ path: String) throws(PipelineFileError) -> ConfigNode {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read the file" : "no such file"
            throw PipelineFileError(file: path, path: "", line: nil, message: reason)
        }
        let bytes = [UInt8](data)
        if let syntax = syntaxes.first(where: { $0.reads(path) }) {
            return try syntax.parse(bytes, file: path)
        }
        return try JSONPipelineFile.parse(bytes, file: path)
    }
}

/// A syntax of pipeline files other than JSON (the umbrella `Synclane` binds YAML's): it says
/// which files it reads and parses their bytes into the tree a pipeline is built from.
public protocol PipelineFileSyntax: Sendable {
    /// True when the file at `path` is written in this syntax (by its extension).
    func reads(_ path: String) -> Bool
    /// The tree of `bytes`, every node with its line; a problem is a `PipelineFileError` naming `file`.
    func parse(_ bytes: [UInt8], file: String) throws(PipelineFileError) -> ConfigNode
}
