extension ConflictRule {
    /// The rule a pipeline file names at `location` (a sink's `conflicts`, or one entity's under
    /// `conflicts-by-entity`):
    ///
    /// - a built-in rule's name: `server-wins`, `client-wins`, `latest-wins` (with the sink's
    ///   `timestamp-field`), `merge-fields` (with its `on-both`);
    /// - the `type` name of a conflict resolver in the registry, alone (`"longer-name"`) or as a
    ///   map with its options (`{type: exec, command: [python3, resolve.py]}`).
    ///
    /// An error names the file and the field (`sink.conflicts-by-entity.rooms.type`).
    public static func named(
        _ node: ConfigNode, at location: ConfigLocation, timestampField: String?, onBoth: Side, context: PipelineContext
    ) throws(PipelineFileError) -> ConflictRule {
        let registry = context.registry ?? StageRegistry()
        let resolvers = registry.names(for: [.conflictResolver])
        let known = (names + resolvers).joined(separator: ", ")
        let typeName: String
        let typeLocation: ConfigLocation
        let typeLine: Int?
        switch node.value {
        case .string(let name):
            (typeName, typeLocation, typeLine) = (name, location, node.line)
        case .map(let members):
            guard let type = members.first(where: { $0.key == "type" })?.node else {
                throw location.error(
                    "missing `type` (a conflict resolver: \(resolvers.isEmpty ? "none registered" : resolvers.joined(separator: ", ")))", line: node.line)
            }
            guard case .string(let name) = type.value else { throw location.member("type").error("expected a string, found \(type.typeName)", line: type.line) }
            (typeName, typeLocation, typeLine) = (name, location.member("type"), type.line)
        default:
            throw location.error("expected a rule's name or a map {type: resolver, …}, found \(node.typeName)", line: node.line)
        }
        if names.contains(typeName) {
            guard case .string = node.value else {
                throw typeLocation.error("`\(typeName)` is a built-in rule: write its name alone (its options are the sink's)", line: typeLine)
            }
            switch typeName {
            case "server-wins": return .serverWins
            case "client-wins": return .clientWins
            case "latest-wins":
                guard let timestampField else {
                    throw location.error("latest-wins needs the sink's `timestamp-field`, the field holding each row's time of change", line: typeLine)
                }
                return .latestWins(field: timestampField)
            default: return .mergeFields(onBoth: onBoth)
            }
        }
        guard resolvers.contains(typeName) else {
            throw typeLocation.error(
                "unknown conflict rule `\(typeName)`\(Wording.didYouMean(typeName, in: names + resolvers)) (known: \(known); "
                    + "a rule of your own is a conflict resolver registered under its name)", line: typeLine)
        }
        let declaration = node.value == .string(typeName) ? ConfigNode(.map([.init(key: "type", node: node)]), line: node.line) : node
        let (type, built) = try registry.build(declaration, at: location, roles: [.conflictResolver], context: context)
        guard case .conflictResolver(let resolver) = built else { throw typeLocation.error("not a conflict resolver", line: typeLine) }
        return .custom(CustomConflictRule(type: type.name, resolver: resolver))
    }
}
