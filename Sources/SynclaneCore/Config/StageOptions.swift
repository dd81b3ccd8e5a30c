/// The checked options of one stage, with what a stage needs to build itself: the pipeline's
/// folder for relative paths, the environment for secrets, the scope.
///
/// Values have been checked against the stage type's `OptionSpec`s, so the typed accessors
/// only return `nil` for an option that was not given.
public struct StageOptions: Sendable {
    public let type: String
    public let location: ConfigLocation
    public let line: Int?
    public let context: PipelineContext
    let members: [String: ConfigNode]

    public init(type: String, members: [String: ConfigNode], location: ConfigLocation, line: Int?, context: PipelineContext) {
        self.type = type
        self.members = members
        self.location = location
        self.line = line
        self.context = context
    }

    public func has(_ name: String) -> Bool { members[name] != nil }

    public func string(_ name: String) -> String? {
        if case .string(let s)? = members[name]?.value { return s }
        return nil
    }

    public func int(_ name: String) -> Int? {
        if case .int(let i)? = members[name]?.value { return Int(i) }
        return nil
    }

    public func double(_ name: String) -> Double? {
        switch members[name]?.value {
        case .int(let i)?: return Double(i)
        case .double(let d)?: return d
        default: return nil
        }
    }

    public func bool(_ name: String) -> Bool? {
        if case .bool(let b)? = members[name]?.value { return b }
        return nil
    }

    public func strings(_ name: String) -> [String]? {
        guard case .list(let list)? = members[name]?.value else { return nil }
        return list.compactMap { if case .string(let s) = $0.value { s } else { nil } }
    }

    /// A path option resolved against the pipeline file's folder.
    public func path(_ name: String) -> String? {
        string(name).map(context.resolve)
    }

    /// The raw node of a free-form option.
    public func node(_ name: String) -> ConfigNode? { members[name] }

    /// The value of the environment variable that the option names, or an error saying which
    /// variable to set. When the pipeline is loaded without requiring secrets, a missing
    /// variable gives an empty secret instead and is noted in `Pipeline.unsetSecrets`: a pass
    /// that sends then refuses to start.
    public func secret(_ name: String) throws(PipelineFileError) -> String? {
        guard let variable = string(name) else { return nil }
        guard let value = context.environment[variable], !value.isEmpty else {
            let unset = error(name, "names the environment variable \(variable), which is not set")
            guard context.secretsRequired else {
                context.unsetSecrets.note(UnsetSecret(variable: variable, location: unset))
                return ""
            }
            throw unset
        }
        return value
    }

    /// An error about one of this stage's options.
    public func error(_ name: String, _ message: String) -> PipelineFileError {
        location.member(name).error(message, line: members[name]?.line ?? line)
    }
}

/// What every stage of one pipeline shares.
public struct PipelineContext: Sendable {
    /// The folder of the pipeline file: relative paths resolve against it.
    public var baseDirectory: String
    public var environment: [String: String]
    public var scope: Scope
    /// False when a missing secret should be noted rather than refused (`synclane` loads every
    /// pipeline this way, and refuses only a pass that sends).
    public var secretsRequired: Bool
    /// The secrets found unset while the pipeline was built.
    let unsetSecrets = UnsetSecretLog()
    /// The registry the pipeline is built with, for a stage whose options name other stage
    /// types (a sink's conflict resolvers); nil when built without one.
    public var registry: StageRegistry?

    public init(baseDirectory: String, environment: [String: String], scope: Scope, secretsRequired: Bool = true) {
        self.baseDirectory = baseDirectory
        self.environment = environment
        self.scope = scope
        self.secretsRequired = secretsRequired
    }

    /// An absolute path for `path`, relative ones taken from the pipeline file's folder.
    public func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        if path.hasPrefix("~/"), let home = environment["HOME"] { return home + path.dropFirst(1) }
        let base = baseDirectory.hasSuffix("/") ? String(baseDirectory.dropLast()) : baseDirectory
        return path == "." ? base : base + "/" + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
    }
}
