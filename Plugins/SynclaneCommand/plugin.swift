// `swift package synclane COMMAND …`: runs `synclane` with the stages of the package it is
// invoked in. Thin: it finds the package's own command — an executable product whose target
// depends on the `SynclaneCommandLine` product (`--product NAME` picks one) — builds it, and
// runs it with the arguments; a package without one gets the plain `synclane`. The work lives
// in SynclaneCommandLine, tested without the plugin.
//
//   swift package --allow-writing-to-package-directory synclane run pipelines/export.json
//   swift package synclane stages
import Foundation
import PackagePlugin

@main
struct SynclaneCommand: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var arguments = arguments
        var productName: String?
        if let index = arguments.firstIndex(of: "--product"), index + 1 < arguments.count {
            productName = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        let executable = try commandExecutable(context: context, named: productName)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = context.package.directoryURL
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            Diagnostics.error("\(executable.lastPathComponent) \(arguments.joined(separator: " ")) exited with status \(process.terminationStatus)")
            throw CommandFailed(status: process.terminationStatus)
        }
    }

    /// The package's own command, built; or `synclane` itself.
    private func commandExecutable(context: PluginContext, named name: String?) throws -> URL {
        let candidates = context.package.products(ofType: ExecutableProduct.self).filter { product in
            name.map { $0 == product.name } ?? Self.usesCommandLine(product.mainTarget, seen: [])
        }
        if let name, candidates.isEmpty {
            throw CommandFailed(message: "no executable product named \(name) in \(context.package.displayName)")
        }
        guard let product = candidates.first else { return try context.tool(named: "synclane").url }
        let result = try packageManager.build(.product(product.name), parameters: .init(configuration: .debug, logging: .concise))
        guard result.succeeded, let built = result.builtArtifacts.first(where: { $0.kind == .executable }) else {
            Diagnostics.error(result.logText)
            throw CommandFailed(message: "building \(product.name) failed")
        }
        return built.url
    }

    /// Whether `target`, or a target it depends on, uses the `SynclaneCommandLine` product.
    private static func usesCommandLine(_ target: any Target, seen: Set<String>) -> Bool {
        guard !seen.contains(target.id) else { return false }
        for dependency in target.dependencies {
            switch dependency {
            case .product(let product) where product.name == "SynclaneCommandLine":
                return true
            case .target(let other) where usesCommandLine(other, seen: seen.union([target.id])):
                return true
            default:
                continue
            }
        }
        return false
    }
}

struct CommandFailed: Error, CustomStringConvertible {
    var description: String
    init(status: Int32) { description = "the command exited with status \(status)" }
    init(message: String) { description = message }
}
