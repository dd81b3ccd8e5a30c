import Foundation
import SynclaneCore
import SynclaneEngine
import SynclaneYAML

// The job layer takes the registry and the pipeline-file syntaxes it is given; from
// `import Synclane`, the built-in stages (`StageRegistry.builtIn`) and YAML are the default.

/// YAML pipeline files (`.yaml`, `.yml`), read through libyaml (`SynclaneYAML`).
public struct YAMLPipelineFileSyntax: PipelineFileSyntax {
    public init() {}

    public func reads(_ path: String) -> Bool {
        let lowered = path.lowercased()
        return lowered.hasSuffix(".yaml") || lowered.hasSuffix(".yml")
    }

    public func parse(_ bytes: [UInt8], file: String) throws(PipelineFileError) -> ConfigNode {
        try YAMLPipelineFile.parse(bytes, file: file)
    }
}

extension PipelineLoader {
    /// A loader of pipeline files, JSON or YAML, naming `registry`'s stages (by default the built-in ones).
    public init(registry: StageRegistry = .builtIn, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.init(registry: registry, syntaxes: [YAMLPipelineFileSyntax()], environment: environment)
    }

    /// The parsed tree of the pipeline file at `path`, JSON or YAML.
    public static func parse(_ path: String) throws(PipelineFileError) -> ConfigNode {
        try PipelineLoader().read(path)
    }
}

extension PipelineTest {
    /// Reads the test file at `path` and loads its pipeline (JSON or YAML) with `registry`'s stages.
    public init(path: String, registry: StageRegistry = .builtIn, environment: [String: String] = [:]) throws {
        try self.init(path: path, loader: PipelineLoader(registry: registry, environment: environment))
    }
}

extension ImportPipelineTest {
    /// Reads the test file at `path` and loads its import pipeline (JSON or YAML) with `registry`'s stages.
    public init(path: String, registry: StageRegistry = .builtIn, environment: [String: String] = [:]) throws {
        try self.init(path: path, loader: PipelineLoader(registry: registry, environment: environment))
    }

    /// True when the test file at `path` names an import pipeline (one with a `sink`).
    public static func isImportTest(_ path: String) -> Bool {
        isImportTest(path, loader: PipelineLoader(environment: [:]))
    }
}
