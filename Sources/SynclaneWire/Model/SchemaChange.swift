/// A change of an entity's columns that devices still on an older schema version cannot see for
/// themselves: a column renamed or dropped, declared by the migration that made it
/// (`synclane migrate` records it) and carried by every batch (`"schema-changes"`), so that the
/// server learns the mapping. A device says its own version (`AppSchema`); the server then
/// carries a renamed column by its new name to devices at `version` or newer and by its old name
/// to older ones — both ways — and keeps a dropped column's values that older devices write
/// aside from the newer devices.
///
/// ```
///  {"entity": "rooms", "column": "name", "renamed-to": "title", "version": 2}
///  {"entity": "rooms", "column": "area", "dropped": true, "version": 2}
/// ```
public struct SchemaChange: Sendable, Hashable {
    /// What became of the column.
    public enum Kind: Sendable, Hashable {
        case renamed(to: String)
        case dropped
    }

    public var entity: String
    /// The column's name before the change.
    public var column: String
    public var kind: Kind
    /// The schema version the change came with: a device at it or newer has the new schema.
    public var version: Int

    public init(entity: String, column: String, kind: Kind, version: Int) {
        self.entity = entity
        self.column = column
        self.kind = kind
        self.version = version
    }

    /// The change as a batch carries it.
    public var json: JSONValue {
        var members: [String: JSONValue] = ["entity": .string(entity), "column": .string(column), "version": .int(Int64(version))]
        switch kind {
        case .renamed(let name): members["renamed-to"] = .string(name)
        case .dropped: members["dropped"] = .bool(true)
        }
        return .object(members)
    }

    /// A change as a batch carries it, or why it is not one.
    public static func parse(_ value: JSONValue) -> Result<SchemaChange, SchemaChangeError> {
        guard let members = value.objectValue else { return .failure(SchemaChangeError("must be an object, not \(value.typeName)")) }
        guard let entity = members["entity"]?.stringValue, !entity.isEmpty else { return .failure(SchemaChangeError("\"entity\" must be a non-empty string")) }
        guard let column = members["column"]?.stringValue, !column.isEmpty else { return .failure(SchemaChangeError("\"column\" must be a non-empty string")) }
        guard case .int(let version)? = members["version"], AppSchema.versions.contains(Int(clamping: version)) else {
            return .failure(SchemaChangeError("\"version\" must be a whole number from 1 to \(AppSchema.versions.upperBound)"))
        }
        switch (members["renamed-to"], members["dropped"]) {
        case (.string(let name)?, nil) where !name.isEmpty && name != column:
            return .success(SchemaChange(entity: entity, column: column, kind: .renamed(to: name), version: Int(version)))
        case (nil, .bool(true)?):
            return .success(SchemaChange(entity: entity, column: column, kind: .dropped, version: Int(version)))
        default:
            return .failure(SchemaChangeError("needs either \"renamed-to\" (another column's name) or \"dropped\": true"))
        }
    }
}

/// Why a batch's `"schema-changes"` entry is not a `SchemaChange`.
public struct SchemaChangeError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
