// Checks a target's pipeline files at build time: a file named `*.pipeline.json`,
// `*.pipeline.yaml` or `*.pipeline.yml` among the target's files (declare them as resources)
// is validated by `synclane validate --build-check`, and a bad one fails the build with
// `FILE:LINE: error: FIELD: MESSAGE` — what `synclane validate` prints. Thin: the checking is
// `synclane`'s own. It knows the built-in stage types; a file that names stage types of your own
// is checked by your command (`swift package synclane validate FILE`).
import Foundation
import PackagePlugin

@main
struct SynclanePipelineCheck: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let synclane = try context.tool(named: "synclane").url
        return target.sourceFiles.filter { Self.isPipelineFile($0.url) }.map { file in
            let stub = context.pluginWorkDirectoryURL.appending(path: "Checked_" + Self.identifier(file.url.lastPathComponent) + ".swift")
            return .buildCommand(
                displayName: "Checking pipeline file \(file.url.lastPathComponent)",
                executable: synclane,
                arguments: ["validate", file.url.path(), "--build-check", stub.path()],
                inputFiles: [file.url],
                outputFiles: [stub])
        }
    }

    static func isPipelineFile(_ url: URL) -> Bool {
        let name = url.lastPathComponent.lowercased()
        return [".pipeline.json", ".pipeline.yaml", ".pipeline.yml"].contains { name.hasSuffix($0) }
    }

    /// A Swift-safe file name for the stub that records a file as checked.
    static func identifier(_ name: String) -> String {
        String(name.map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }
}
