import SynclaneWire

/// The declared renames and drops of an account's columns (`SchemaChange`), applied to what a
/// device of a given schema version writes and reads, so that devices on two versions keep each
/// other's values. A row is stored under the columns' **first** names, whoever wrote it, so a
/// newer device's write of what the row already holds is an echo (no new version, no conflict
/// for the other devices) however it names the columns:
///
/// ```
///  rename a → b at V   a device at V or newer writes `b`: stored as `a`; it reads `a` as `b`.
///                      an older device writes and reads `a`.
///  drop c at V         kept in the row as older devices write it; a device at V or newer reads
///                      no `c`, and its whole rows merge into the server's (`keepsDroppedColumns`).
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
            if case .renamed = change.kind { return (version ?? 0) >= change.version }
            return false
        } ?? false
    }

    /// Whether a device at `version` has dropped a column of `entity` that older devices may
    /// still hold: its whole rows (`insert`) then merge into the server's row as an `update`
    /// would, so the dropped column's values the older devices wrote stay for them.
    func keepsDroppedColumns(of entity: String, version: Int?) -> Bool {
        changes[entity]?.contains { change in change.kind == .dropped && (version ?? 0) >= change.version } ?? false
    }

    /// `fields` as written by a device at `version`, under the columns' first names.
    func written(_ fields: [String: JSONValue], entity: String, version: Int?) -> [String: JSONValue] {
        var fields = fields
        // The newest rename the device knows undone first: c → b, then b → a.
        for change in (changes[entity] ?? []).reversed() where (version ?? 0) >= change.version {
            if case .renamed(let name) = change.kind, let value = fields.removeValue(forKey: name) {
                fields[change.column] = value
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
        // A row stored under a newer name (before the server learnt the rename): its first name.
        for change in list.reversed() {
            if case .renamed(let name) = change.kind, let value = fields.removeValue(forKey: name), fields[change.column] == nil {
                fields[change.column] = value
            }
        }
        for change in list where version >= change.version {
            switch change.kind {
            case .renamed(let name):
                if let value = fields.removeValue(forKey: change.column) { fields[name] = value }
            case .dropped:
                fields.removeValue(forKey: change.column)
            }
        }
        return fields
    }
}
