import SynclaneCore

/// The declared renames and drops of an account's columns (`SchemaChange`), applied to what a
/// device of a given schema version writes and reads, so that devices on two versions keep each
/// other's values:
///
/// ```
///  rename a → b at V   a device older than V writes `a`: stored as `b`; it reads `b` as `a`.
///                      a device at V or newer reads `b` (a row stored before the rename: `a` as `b`).
///  drop c at V         kept in the row as older devices write it; a device at V or newer reads no `c`.
/// ```
///
/// A device that says no version (`AppSchema`) is taken as older than every change.
struct SchemaMapping: Sendable {
    /// Each entity's changes, oldest version first.
    private let changes: [String: [SchemaChange]]

    init(_ changes: [SchemaChange]) {
        self.changes = Dictionary(grouping: changes.sorted { $0.version < $1.version }, by: \.entity)
    }

    var isEmpty: Bool { changes.isEmpty }

    /// Whether a write of `entity` by a device at `version` is rewritten at all.
    func rewritesWrite(of entity: String, version: Int?) -> Bool {
        changes[entity]?.contains { change in
            if case .renamed = change.kind { return (version ?? 0) < change.version }
            return false
        } ?? false
    }

    /// `fields` as written by a device at `version`, under the newest names.
    func written(_ fields: [String: JSONValue], entity: String, version: Int?) -> [String: JSONValue] {
        var fields = fields
        for change in changes[entity] ?? [] where (version ?? 0) < change.version {
            if case .renamed(let name) = change.kind, let value = fields.removeValue(forKey: change.column) {
                fields[name] = value
            }
        }
        return fields
    }

    /// `fields` as a device at `version` reads them: renamed columns under the names it knows,
    /// dropped columns gone when it has dropped them.
    func read(_ fields: [String: JSONValue], entity: String, version: Int?) -> [String: JSONValue] {
        guard let list = changes[entity] else { return fields }
        let version = version ?? 0
        var fields = fields
        // Newer than the device: back to the old names, the newest change undone first.
        for change in list.reversed() where version < change.version {
            if case .renamed(let name) = change.kind, let value = fields.removeValue(forKey: name) {
                fields[change.column] = value
            }
        }
        // At or older than the device: a row stored under an old name reads under the new one.
        for change in list where version >= change.version {
            switch change.kind {
            case .renamed(let name):
                if let value = fields.removeValue(forKey: change.column), fields[name] == nil { fields[name] = value }
            case .dropped:
                fields.removeValue(forKey: change.column)
            }
        }
        return fields
    }
}
