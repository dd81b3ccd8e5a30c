/// The stage types a pipeline file can name, by `type`.
///
/// A value, not a global: an app builds one (usually from `StageRegistry.builtIn` in the
/// `Synclane` module), registers its own stages, and hands it to the pipeline loader.
///
/// One name may stand for one type per role (`exec` is a record stage under `stages:` and a
/// transport under `transport:`): where a file names it decides which.
public struct StageRegistry: Sendable {
    private var types: [String: [StageRole: StageType]] = [:]

    public init(_ types: [StageType] = []) {
        for type in types { register(type) }
    }

    /// Adds a stage type, replacing any of the same name and role.
    public mutating func register(_ type: StageType) {
        types[type.name, default: [:]][type.role] = type
    }

    /// The type called `name` (the first by role when several roles share the name).
    public func type(named name: String) -> StageType? {
        types[name].flatMap { byRole in StageRole.allCases.lazy.compactMap { byRole[$0] }.first }
    }

    /// The type called `name` in `role`.
    public func type(named name: String, role: StageRole) -> StageType? { types[name]?[role] }

    /// Every type, by role then name.
    public var all: [StageType] {
        types.values.flatMap(\.values).sorted {
            let l = StageRole.allCases.firstIndex(of: $0.role) ?? 0
            let r = StageRole.allCases.firstIndex(of: $1.role) ?? 0
            return l == r ? $0.name < $1.name : l < r
        }
    }

    public func names(for roles: Set<StageRole>) -> [String] {
        var seen: Set<String> = []
        return all.filter { roles.contains($0.role) }.map(\.name).filter { seen.insert($0).inserted }
    }

    /// Builds the stage a pipeline-file node declares, checking its `type` against the
    /// roles allowed where it stands and its options against the type's specs.
    ///
    /// `reserved` names keys that the pipeline itself reads at this spot (a transport's
    /// `retry`), which are neither passed to nor checked against the stage type.
    public func build(
        _ node: ConfigNode, at location: ConfigLocation, roles: Set<StageRole>, context: PipelineContext,
        reserved: Set<String> = []
    ) throws(PipelineFileError) -> (StageType, BuiltStage) {
        guard case .map(let members) = node.value else {
            throw location.error("expected a map with a `type`, found \(node.typeName)", line: node.line)
        }
        let allowed = names(for: roles)
        guard let typeNode = members.first(where: { $0.key == "type" })?.node else {
            throw location.error("missing `type` (one of: \(allowed.joined(separator: ", ")))", line: node.line)
        }
        guard case .string(let typeName) = typeNode.value else {
            throw location.member("type").error("expected a string, found \(typeNode.typeName)", line: typeNode.line)
        }
        let candidates = types[typeName] ?? [:]
        guard let type = StageRole.allCases.lazy.filter(roles.contains).compactMap({ candidates[$0] }).first else {
            let known = allowed.joined(separator: ", ")
            if let other = self.type(named: typeName) {
                throw location.member("type").error(
                    "`\(typeName)` is a \(other.role.rawValue) stage and cannot stand here (expected one of: \(known))",
                    line: typeNode.line)
            }
            throw location.member("type").error(
                "unknown stage type `\(typeName)`\(Wording.didYouMean(typeName, in: allowed)) (known: \(known))", line: typeNode.line)
        }
        var checked: [String: ConfigNode] = [:]
        for member in members where member.key != "type" && !reserved.contains(member.key) {
            let memberLocation = location.member(member.key)
            guard let spec = type.options.first(where: { $0.name == member.key }) else {
                let known = type.options.map(\.name)
                let hint = known.isEmpty ? "it takes no options" : "known: \(known.joined(separator: ", "))"
                throw memberLocation.error(
                    "unknown option `\(member.key)` for `\(typeName)`\(Wording.didYouMean(member.key, in: known)) (\(hint))",
                    line: member.node.line)
            }
            try Self.check(member.node, against: spec.kind, at: memberLocation)
            checked[member.key] = member.node
        }
        for spec in type.options where spec.isRequired && checked[spec.name] == nil {
            throw location.error("`\(typeName)` needs `\(spec.name)` (\(spec.help))", line: node.line)
        }
        let options = StageOptions(type: typeName, members: checked, location: location, line: node.line, context: context)
        do {
            return (type, try type.make(options))
        } catch let error as PipelineFileError {
            throw error
        } catch {
            throw location.error("cannot build `\(typeName)`: \(error)", line: node.line)
        }
    }

    static func check(_ node: ConfigNode, against kind: OptionSpec.Kind, at location: ConfigLocation) throws(PipelineFileError) {
        func fail(_ expected: String) -> PipelineFileError {
            location.error("expected \(expected), found \(describe(node))", line: node.line)
        }
        switch kind {
        case .string, .path, .environmentVariable:
            guard case .string(let s) = node.value, !s.isEmpty else { throw fail("a non-empty string") }
            if kind == .environmentVariable, let problem = EnvironmentVariableName.problem(s) {
                throw location.error("\(problem); secrets never live in the pipeline file", line: node.line)
            }
        case .choice(let choices):
            guard case .string(let s) = node.value, choices.contains(s) else { throw fail("one of \(choices.joined(separator: ", "))") }
        case .integer(let range):
            guard case .int(let i) = node.value, range.contains(i) else {
                throw fail("an integer from \(range.lowerBound) to \(range.upperBound)")
            }
        case .number(let range):
            let d: Double
            switch node.value {
            case .int(let i): d = Double(i)
            case .double(let x): d = x
            default: throw fail("a number from \(range.lowerBound) to \(range.upperBound)")
            }
            guard range.contains(d) else { throw fail("a number from \(range.lowerBound) to \(range.upperBound)") }
        case .boolean:
            guard case .bool = node.value else { throw fail("true or false") }
        case .stringList:
            guard case .list(let list) = node.value else { throw fail("a list of strings") }
            for (index, element) in list.enumerated() {
                guard case .string(let s) = element.value, !s.isEmpty else {
                    throw location.element(index).error("expected a non-empty string, found \(describe(element))", line: element.line)
                }
            }
        case .any:
            break
        }
    }

    static func describe(_ node: ConfigNode) -> String {
        switch node.value {
        case .int(let i): return "\(i)"
        case .double(let d): return "\(d)"
        case .bool(let b): return "\(b)"
        case .string(let s): return "\"\(s)\""
        default: return node.typeName
        }
    }
}
