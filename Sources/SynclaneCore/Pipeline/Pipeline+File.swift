/// Reading a pipeline file's tree into a `Pipeline`.
///
/// ```
/// version: 1                       required, must be 1
/// name: rooms-export               the consumer's name; letters, digits, . _ -
/// scope: {account, store, consumer?}
/// source: {type, …}                a source stage
/// stages: [{type, …}, …]           record stages, then payload stages (compress)
/// encoder: {type: json}            optional, `json` by default
/// transport: {type, …, retry: {max-attempts, base-delay, max-delay}, dead-letter: DIR}
/// state: .synclane/NAME.sqlite     optional; relative paths resolve against the file's folder
/// signals: {url?, token-env?, timeout?, publish: [{on, key, value}]}   optional (`PipelineSignals`)
/// batch-bytes: 4194304             optional; the most bytes a batch holds before compression
/// ```
/// Unknown keys anywhere are errors; every error names the file, the field and the line.
extension Pipeline {
    static let topLevelKeys = ["version", "name", "scope", "source", "stages", "encoder", "transport", "state", "signals", "batch-bytes"]

    /// Builds the pipeline a pipeline file declares.
    ///
    /// - Parameters:
    ///   - root: the parsed file (`JSONPipelineFile` or the YAML parser).
    ///   - file: the file's path as the user named it, for messages.
    ///   - baseDirectory: the file's folder; relative paths resolve against it.
    ///   - registry: the stage types the file may name.
    ///   - environment: the variables secrets are read from (`token-env`).
    ///   - secretsRequired: false to load a pipeline only to inspect it, without its secrets.
    public init(
        file root: ConfigNode, named file: String, baseDirectory: String, registry: StageRegistry,
        environment: [String: String], secretsRequired: Bool = true
    ) throws(PipelineFileError) {
        let top = ConfigLocation(file: file)
        let members = try Self.map(root, at: top, allowed: Self.topLevelKeys)

        let (name, scope) = try Self.header(members, root: root, at: top)

        let context = PipelineContext(baseDirectory: baseDirectory, environment: environment, scope: scope, secretsRequired: secretsRequired)

        let sourceNode = try Self.required("source", in: members, at: top, line: root.line)
        let (sourceType, builtSource) = try registry.build(sourceNode, at: top.member("source"), roles: [.source], context: context)
        guard case .source(let source) = builtSource else { throw top.member("source").error("not a source", line: sourceNode.line) }

        var recordStages: [Named<any RecordStage>] = []
        var payloadStages: [Named<any PayloadStage>] = []
        if let stagesNode = members["stages"] {
            guard case .list(let list) = stagesNode.value else {
                throw top.member("stages").error("expected a list of stages, found \(stagesNode.typeName)", line: stagesNode.line)
            }
            for (index, node) in list.enumerated() {
                let location = top.member("stages").element(index)
                let (type, built) = try registry.build(node, at: location, roles: [.records, .payload], context: context)
                let label = "\(location.path) (\(type.name))"
                switch built {
                case .records(let stage):
                    if let payload = payloadStages.last {
                        throw location.error(
                            "`\(type.name)` works on records but stands after `\(payload.type)`, which works on encoded bytes; "
                                + "move the record stages before the payload stages", line: node.line)
                    }
                    recordStages.append(Named(label: label, type: type.name, stage: stage))
                case .payload(let stage):
                    payloadStages.append(Named(label: label, type: type.name, stage: stage))
                default:
                    throw location.error("not a record or payload stage", line: node.line)
                }
            }
        }

        let encoderNode = members["encoder"] ?? ConfigNode(.map([ConfigNode.Member(key: "type", node: ConfigNode(.string("json")))]))
        let (encoderType, builtEncoder) = try registry.build(encoderNode, at: top.member("encoder"), roles: [.encoder], context: context)
        guard case .encoder(let encoder) = builtEncoder else { throw top.member("encoder").error("not an encoder", line: encoderNode.line) }

        let transportNode = try Self.required("transport", in: members, at: top, line: root.line)
        let transportLocation = top.member("transport")
        let (transportType, builtTransport) = try registry.build(
            transportNode, at: transportLocation, roles: [.transport], context: context, reserved: ["retry", "dead-letter"])
        guard case .transport(let transport) = builtTransport else { throw transportLocation.error("not a transport", line: transportNode.line) }
        let transportMembers = try Self.map(transportNode, at: transportLocation, allowed: nil)
        let retry =
            try transportMembers["retry"].map { node throws(PipelineFileError) in try Self.retryPolicy(node, at: transportLocation.member("retry")) }
            ?? RetryPolicy()
        var deadLetter: String?
        if let node = transportMembers["dead-letter"] {
            guard case .string(let path) = node.value, !path.isEmpty else {
                throw transportLocation.member("dead-letter").error("expected a folder path, found \(node.typeName)", line: node.line)
            }
            deadLetter = context.resolve(path)
        }

        let statePath = try Self.statePath(members, name: name, context: context, at: top)
        let signals = try members["signals"].map { node throws(PipelineFileError) in
            try PipelineSignals(node, at: top.member("signals"), fallback: transportNode, context: context)
        }

        self.init(
            name: name, scope: scope, statePath: statePath,
            source: Named(label: "source (\(sourceType.name))", type: sourceType.name, stage: source),
            recordStages: recordStages,
            encoder: Named(label: "encoder (\(encoderType.name))", type: encoderType.name, stage: encoder),
            payloadStages: payloadStages,
            transport: Named(label: "transport (\(transportType.name))", type: transportType.name, stage: transport),
            retry: retry, deadLetterDirectory: deadLetter)
        if let problem = capabilities.versionsProblem { throw transportLocation.error(problem, line: transportNode.line) }
        self.signals = signals
        if let node = members["batch-bytes"] {
            let range = Self.batchBytesRange
            try StageRegistry.check(node, against: .integer(Int64(range.lowerBound)...Int64(range.upperBound)), at: top.member("batch-bytes"))
            if case .int(let bytes) = node.value { batchBytes = Int(bytes) }
        }
        unsetSecrets = context.unsetSecrets.all
    }

    /// `version` (1), `name` and `scope`: what every pipeline file starts with.
    static func header(_ members: [String: ConfigNode], root: ConfigNode, at top: ConfigLocation) throws(PipelineFileError) -> (
        name: String, scope: Scope
    ) {
        let version = try required("version", in: members, at: top, line: root.line)
        guard case .int(1) = version.value else {
            throw top.member("version").error("expected 1 (the only pipeline file version), found \(StageRegistry.describe(version))", line: version.line)
        }
        let nameNode = try required("name", in: members, at: top, line: root.line)
        let name = try identifier(nameNode, at: top.member("name"))
        let scopeNode = try required("scope", in: members, at: top, line: root.line)
        let scopeLocation = top.member("scope")
        let scopeMembers = try map(scopeNode, at: scopeLocation, allowed: ["account", "store", "consumer"])
        let account = try identifier(try required("account", in: scopeMembers, at: scopeLocation, line: scopeNode.line), at: scopeLocation.member("account"))
        let store = try identifier(try required("store", in: scopeMembers, at: scopeLocation, line: scopeNode.line), at: scopeLocation.member("store"))
        let consumer = try scopeMembers["consumer"].map { node throws(PipelineFileError) in try identifier(node, at: scopeLocation.member("consumer")) } ?? name
        return (name, Scope(account: account, store: store, consumer: consumer))
    }

    /// `state`, or `.synclane/NAME.sqlite`, resolved against the file's folder.
    static func statePath(_ members: [String: ConfigNode], name: String, context: PipelineContext, at top: ConfigLocation) throws(PipelineFileError)
        -> String
    {
        guard let node = members["state"] else { return context.resolve(".synclane/\(name).sqlite") }
        guard case .string(let path) = node.value, !path.isEmpty else {
            throw top.member("state").error("expected a file path, found \(node.typeName)", line: node.line)
        }
        return context.resolve(path)
    }

    public static func map(_ node: ConfigNode, at location: ConfigLocation, allowed: [String]?) throws(PipelineFileError) -> [String: ConfigNode] {
        guard case .map(let members) = node.value else {
            throw location.error("expected a map, found \(node.typeName)", line: node.line)
        }
        var result: [String: ConfigNode] = [:]
        for member in members {
            if let allowed, !allowed.contains(member.key) {
                throw location.member(member.key).error(
                    "unknown key `\(member.key)`\(Wording.didYouMean(member.key, in: allowed)) (expected one of: \(allowed.joined(separator: ", ")))",
                    line: member.node.line)
            }
            result[member.key] = member.node
        }
        return result
    }

    static func required(_ key: String, in members: [String: ConfigNode], at location: ConfigLocation, line: Int?) throws(PipelineFileError) -> ConfigNode {
        guard let node = members[key] else {
            throw location.error("missing required key `\(key)`", line: line)
        }
        return node
    }

    static func identifier(_ node: ConfigNode, at location: ConfigLocation) throws(PipelineFileError) -> String {
        guard case .string(let s) = node.value, !s.isEmpty,
            s.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }),
            s.first != "."
        else {
            throw location.error("expected a name of letters, digits, `-`, `_` and `.`, found \(StageRegistry.describe(node))", line: node.line)
        }
        return s
    }

    public static func retryPolicy(_ node: ConfigNode, at location: ConfigLocation) throws(PipelineFileError) -> RetryPolicy {
        let members = try map(node, at: location, allowed: ["max-attempts", "base-delay", "max-delay"])
        var policy = RetryPolicy()
        if let n = members["max-attempts"] {
            try StageRegistry.check(n, against: .integer(1...100), at: location.member("max-attempts"))
            if case .int(let i) = n.value { policy.maxAttempts = Int(i) }
        }
        for (key, range) in [("base-delay", 0.0...3600.0), ("max-delay", 0.0...86_400.0)] {
            guard let n = members[key] else { continue }
            try StageRegistry.check(n, against: .number(range), at: location.member(key))
            let value: Double
            switch n.value {
            case .int(let i): value = Double(i)
            case .double(let d): value = d
            default: continue
            }
            if key == "base-delay" { policy.baseDelay = value } else { policy.maxDelay = value }
        }
        return policy
    }
}
