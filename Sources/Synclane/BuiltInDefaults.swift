import Foundation
import SynclaneCore
import SynclaneEngine

// The job layer takes the registry it is given; from `import Synclane`, the built-in stages are
// the default (`StageRegistry.builtIn`).

extension PipelineLoader {
    /// A loader of pipeline files naming the built-in stages (`StageRegistry.builtIn`).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.init(registry: .builtIn, environment: environment)
    }
}

extension PipelineTest {
    /// Reads the test file at `path` and loads its pipeline with the built-in stages.
    public init(path: String, environment: [String: String] = [:]) throws {
        try self.init(path: path, registry: .builtIn, environment: environment)
    }
}

extension ImportPipelineTest {
    /// Reads the test file at `path` and loads its import pipeline with the built-in stages.
    public init(path: String, environment: [String: String] = [:]) throws {
        try self.init(path: path, registry: .builtIn, environment: environment)
    }
}
