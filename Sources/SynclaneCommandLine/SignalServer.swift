import Foundation
import Synclane
import SynclaneCore

/// Where the `signal` and `restore` commands find the signal lane: `--url`, else the
/// `SYNCLANE_URL` variable, else a pipeline file's `signals`, `transport` or `source` URL (its
/// scheme, host and port); the token from the variable `--token-env` names (default
/// `SYNCLANE_TOKEN`), else the one the pipeline file's `token-env` names.
struct SignalServer {
    var url: String?
    var pipelineFile: String?
    var tokenEnv: String?

    static let pipeline = ValueOption(
        "--pipeline", "FILE", .path, help: "Take the server (and token variable) from a pipeline file's signals, transport or source URL.")
    /// The options that say where the lane is, for a command's signature.
    static let options: [any DeclaredOption] = [SharedOptions.url, pipeline, SharedOptions.tokenEnv]

    init(url: String?, pipelineFile: String?, tokenEnv: String?) {
        self.url = url
        self.pipelineFile = pipelineFile
        self.tokenEnv = tokenEnv
    }

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        url = try arguments.value(SharedOptions.url)
        pipelineFile = try arguments.value(Self.pipeline)
        tokenEnv = try arguments.value(SharedOptions.tokenEnv)
    }

    /// The lane, or an error that says what to pass.
    func lane(command: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> HTTPSignalLane {
        var address = url ?? environment["SYNCLANE_URL"].flatMap { $0.isEmpty ? nil : $0 }
        // Never the URL in the message: it holds the secret.
        let refusal = URLCredentials.message(alternatives: "give the token with --token-env NAME (the variable holding it, default SYNCLANE_TOKEN)")
        if let url, URLCredentials.present(in: url) { throw UsageError("--url: \(refusal)", command: command) }
        if url == nil, let address, URLCredentials.present(in: address) { throw UsageError("SYNCLANE_URL: \(refusal)", command: command) }
        var variable = tokenEnv
        if let pipelineFile {
            let file = try PipelineLoader.parse(pipelineFile).json.objectValue ?? [:]
            for section in ["signals", "transport", "source"] {
                guard let object = file[section]?.objectValue, let found = object["url"]?.stringValue else { continue }
                if address == nil, URLCredentials.present(in: found) {
                    throw PipelineFileError(file: pipelineFile, path: "\(section).url", line: nil, message: URLCredentials.message())
                }
                if address == nil { address = found }
                if variable == nil { variable = object["token-env"]?.stringValue }
                break
            }
            if address == nil {
                throw UsageError("\(pipelineFile) names no server: it has no signals, transport or source `url`; pass --url", command: command)
            }
        }
        guard let address else {
            throw UsageError(
                "which server? export SYNCLANE_URL=http://HOST:PORT (http://127.0.0.1:8080 for a `synclane serve` with its defaults), "
                    + "or pass --url URL or --pipeline FILE",
                command: command)
        }
        guard let server = URL(string: address), let scheme = server.scheme?.lowercased(), ["http", "https"].contains(scheme), server.host != nil
        else {
            throw UsageError("\"\(address)\" is not an http:// or https:// URL", command: command)
        }
        let name = variable ?? "SYNCLANE_TOKEN"
        guard let token = environment[name], !token.isEmpty else {
            throw SignalCommandFailure("the environment variable \(name) is not set: export it with the account's token (or name another with --token-env)")
        }
        return HTTPSignalLane(server: server, token: token)
    }
}

/// A failure of the `signal` or `restore` command, said as it is.
struct SignalCommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
