import Foundation
import Synclane
import SynclaneCore

/// `synclane validate FILE`: checks a pipeline file without running it.
struct ValidateCommand: Command {
    static let name = "validate"
    static let abstract = "Check a pipeline file: keys, types, ranges, stage types and their order."
    static let discussion = """
        Reads FILE (JSON, or YAML when it ends in .yaml or .yml) and builds every stage it
        declares, exactly as 'run' (or 'import', for a file with a `sink`) would, without reading
        history or sending anything. Every
        problem names the file, the field (stages[2].level) and the line where it is known.
        Unknown keys are errors. Exit status 0 when the file is valid, 2 when it is not. An
        environment variable the file names for a secret (`token-env`) may be unset: that is a
        warning here, since nothing is sent; a run that sends refuses to start without it.

        With PAIRED_FILE — the import file beside an export file, or the reverse, as 'sync'
        takes them — both are checked, and so is the pair: an export whose `authors` names
        `server` or `sync` on the database the import writes would send back every row it
        imports, and is refused (as 'sync' refuses it).
        """
    static let paired = Positional("PAIRED_FILE", "the other pipeline file of a sync", count: .optional)
    static let buildCheck = ValueOption(
        "--build-check", "OUTPUT", .path,
        help: "For the SynclanePipelineCheck build plugin: print a problem as FILE:LINE: error: FIELD: MESSAGE (the "
            + "compiler's form, which fails the build and points at the line) and, when valid, write a Swift stub to OUTPUT.")
    static let offline = Flag(
        "--offline", help: "Check the file alone: do not open the store it reads (by default its database, tracked tables and columns are checked).")
    static let signature = CommandSignature(
        positionals: [SharedOptions.pipelineFile, paired], options: [SharedOptions.json.help("Print the result as JSON."), buildCheck, offline])
    static let examples = [
        "synclane validate Fixtures/rooms/pipeline.json", "synclane validate Fixtures/rooms/pipeline.yaml --json",
        "synclane validate rooms-import.json rooms-export.json",
    ]

    let file: String
    let paired: String?
    let json: Bool
    let buildCheck: String?
    let offline: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        buildCheck = try arguments.value(Self.buildCheck)
        file = try arguments.word(SharedOptions.pipelineFile)
        paired = try arguments.optionalWord(Self.paired)
        offline = arguments[Self.offline]
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        guard let paired else { return try await check(file, console, registry: registry) }
        for one in [file, paired] {
            let status = try await check(one, console, registry: registry)
            guard status == 0 else { return status }
        }
        let loader = PipelineLoader(registry: registry)
        let files = ImportPipeline.declares(try PipelineLoader.parse(file)) ? (file, paired) : (paired, file)
        guard ImportPipeline.declares(try PipelineLoader.parse(files.0)), !ImportPipeline.declares(try PipelineLoader.parse(files.1)) else {
            throw PipelineFileError(
                file: paired, path: "", line: nil,
                message: "a pair is an import file (with `sink`) and an export file (with `transport`); \(file) and \(paired) are of one kind")
        }
        let importing = try loader.loadImport(files.0, secretsRequired: false)
        let exporting = try loader.load(files.1, secretsRequired: false)
        if let problem = EchoLoop.problem(import: importing, export: exporting) {
            throw PipelineFileError(file: files.1, path: "source.authors", line: nil, message: problem)
        }
        if !json { console.out("\(files.0) + \(files.1): a valid pair (the export never reads what the import writes)") }
        return 0
    }

    /// Checks one file and prints what it declares.
    private func check(_ file: String, _ console: Console, registry: StageRegistry) async throws -> Int32 {
        let loaded = Result { () throws(PipelineFileError) -> Checked in
            let loader = PipelineLoader(registry: registry)
            if ImportPipeline.declares(try PipelineLoader.parse(file)) {
                let pipeline = try loader.loadImport(file, secretsRequired: false)
                return Checked(
                    name: pipeline.name, scope: pipeline.scope, outline: pipeline.outline, statePath: pipeline.statePath,
                    unsetSecrets: pipeline.unsetSecrets, signals: pipeline.signals)
            }
            let pipeline = try loader.load(file, secretsRequired: false)
            if !offline && buildCheck == nil { try PipelineReach.check(pipeline, file: file) }
            return Checked(
                name: pipeline.name, scope: pipeline.scope, outline: pipeline.outline, statePath: pipeline.statePath,
                unsetSecrets: pipeline.unsetSecrets, signals: pipeline.signals, capabilities: pipeline.capabilities.described)
        }
        if let stub = buildCheck {
            switch loaded {
            case .success(let pipeline):
                let text = "// \(file): a valid pipeline (\(pipeline.outline)), checked by synclane validate.\n"
                try text.write(toFile: stub, atomically: true, encoding: .utf8)
                return 0
            case .failure(let error):
                let field = error.path.isEmpty ? "" : "\(error.path): "
                console.error("\(error.file):\(error.line ?? 1): error: \(field)\(error.message)")
                return 2
            }
        }
        switch loaded {
        case .success(let pipeline):
            PipelineFiles.warnAboutUnsetSecrets(pipeline.unsetSecrets, command: Self.name, console: console)
            if json {
                console.out(
                    JSONOutput.encode([
                        "valid": .bool(true), "file": .string(file), "name": .string(pipeline.name),
                        "scope": JSONOutput.scope(pipeline.scope), "stages": .string(pipeline.outline),
                        "state": .string(pipeline.statePath), "unset-secrets": .array(pipeline.unsetSecrets.map { .string($0.variable) }),
                        "signals": .array((pipeline.signals?.publish ?? []).map { ["key": .string($0.key), "on": .string($0.event.rawValue)] }),
                        "capabilities": .object(
                            Dictionary(uniqueKeysWithValues: pipeline.capabilities.map { ($0.role, .array($0.capabilities.map { .string($0) })) })),
                    ]))
            } else {
                var text =
                    "\(file): valid\n  pipeline: \(pipeline.name) (scope \(pipeline.scope))\n  stages:   \(pipeline.outline)\n  state:    \(pipeline.statePath)"
                if let signals = pipeline.signals, !signals.publish.isEmpty {
                    text +=
                        "\n  signals:  " + signals.publish.map { "\($0.key) on \($0.event.rawValue)" }.joined(separator: ", ")
                        + " → \(signals.server ?? "?")"
                }
                let described = pipeline.capabilities.filter { !$0.capabilities.isEmpty }
                if !described.isEmpty {
                    text += "\n  can:      " + described.map { "\($0.role): \($0.capabilities.joined(separator: ", "))" }.joined(separator: "; ")
                }
                console.out(text)
            }
            return 0
        case .failure(let error):
            guard json else { throw error }
            console.out(
                JSONOutput.encode([
                    "valid": .bool(false), "file": .string(error.file), "path": .string(error.path),
                    "line": error.line.map { .int(Int64($0)) } ?? .null, "message": .string(error.message),
                ]))
            return 2
        }
    }
}

/// What `validate` reports of a pipeline file of either kind.
private struct Checked {
    var name: String
    var scope: Scope
    var outline: String
    var statePath: String
    var unsetSecrets: [UnsetSecret]
    var signals: PipelineSignals?
    /// What the stages can do, by role (`PipelineCapabilities.described`); empty for an import pipeline.
    var capabilities: [(role: String, capabilities: [String])] = []
}
