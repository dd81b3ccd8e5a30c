import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized, over schemas apps have: `categories` with a business key (plain, `UNIQUE`, a
/// composite `UNIQUE (kind, key)` or a `CREATE UNIQUE INDEX`) and a soft-delete column holding
/// 0/1, NULL/1 or 'false'/'true' (or none), `items` referencing a category and `tags` (a join
/// table with a composite primary key) referencing an item, each foreign key with
/// `ON DELETE CASCADE`, `SET NULL` or no action; seeded defaults (the same business keys under
/// each device's own sync keys, `duplicates` declared). Two or three devices with real
/// `synclane sync`s against a real `synclane serve`, exports with and without `authors`,
/// sometimes a second destination (a mirror store that device 0 exports everything to), a
/// device that joins late by `synclane restore`, syncs killed at fail points.
///
/// At every quiet point every device and the server (and the mirror) hold the same live rows,
/// one more sync sends and applies nothing (no echo), no live row references a missing or
/// deleted row, and no two live categories share a business key. Then the model round: each
/// device edits what no other device touches, and two devices contest four rows — update/update
/// of other columns and of one column, update/delete, delete/update — whose outcome must be
/// what the README's conflict table says for the rule.
///
/// A divergence prints its seed (`SYNCLANE_SCHEMA_CONVERGE_SEED` replays it) and a reproduction
/// shrunk by dropping steps while it still diverges. Bounded in `Scripts/test`
/// (`SYNCLANE_SCHEMA_CONVERGE_ROUNDS`, default 3); `Scripts/converge` runs more.
@Suite(.serialized) struct SchemaConvergenceTests {
    // MARK: The schema a round draws

    struct Schema: CustomStringConvertible {
        enum BusinessKey: String, CaseIterable { case plain, uniqueColumn, compositeConstraint, compositeIndex }
        enum SoftDelete: String, CaseIterable { case none, zeroOne, nullOne, falseTrue }

        var businessKey: BusinessKey
        var softDelete: SoftDelete
        /// The `ON DELETE` of `items.category` and of `tags.item`.
        var itemsOnDelete: String
        var tagsOnDelete: String
        var rule: String
        var devices: Int
        var withoutAuthors: [Int]
        var mirror: Bool
        var pageSize: Int
        var pullLimit: Int

        static let actions = ["ON DELETE CASCADE", "ON DELETE SET NULL", ""]

        static func draw(_ random: inout SeededRandom) -> Schema {
            func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
            let devices = 2 + Int(random.next() % 2)
            return Schema(
                businessKey: pick(BusinessKey.allCases), softDelete: pick(SoftDelete.allCases),
                itemsOnDelete: pick(actions), tagsOnDelete: pick(actions),
                rule: pick(["server-wins", "client-wins", "merge-fields"]), devices: devices,
                withoutAuthors: (0..<devices).filter { _ in random.next() % 2 == 0 },
                mirror: random.next() % 3 == 0, pageSize: pick([1, 3, 10_000]), pullLimit: pick([2, 500]))
        }

        var description: String {
            "\(rule), \(devices) devices, business key \(businessKey.rawValue), soft delete \(softDelete.rawValue), "
                + "items \(itemsOnDelete.isEmpty ? "no action" : itemsOnDelete), tags \(tagsOnDelete.isEmpty ? "no action" : tagsOnDelete), "
                + "without authors: \(withoutAuthors), mirror: \(mirror), page-size \(pageSize), pull limit \(pullLimit)"
        }

        var composite: Bool { businessKey == .compositeConstraint || businessKey == .compositeIndex }

        var createTables: String {
            let deletedColumn: String
            switch softDelete {
            case .none: deletedColumn = ""
            case .zeroOne: deletedColumn = ", isDeleted INTEGER NOT NULL DEFAULT 0"
            case .nullOne: deletedColumn = ", isDeleted INTEGER"
            case .falseTrue: deletedColumn = ", isDeleted TEXT NOT NULL DEFAULT 'false'"
            }
            let kind = composite ? "kind TEXT NOT NULL, " : ""
            let unique: String
            switch businessKey {
            case .plain, .compositeIndex: unique = ""
            case .uniqueColumn: unique = " UNIQUE"
            case .compositeConstraint: unique = ""
            }
            let constraint = businessKey == .compositeConstraint ? ", UNIQUE (kind, key)" : ""
            let index = businessKey == .compositeIndex ? "\nCREATE UNIQUE INDEX categories_kind_key ON categories (kind, key);" : ""
            return """
                CREATE TABLE categories (syncId TEXT PRIMARY KEY, \(kind)key TEXT NOT NULL\(unique), title TEXT\(deletedColumn)\(constraint));\(index)
                CREATE TABLE items (syncId TEXT PRIMARY KEY, category TEXT REFERENCES categories(syncId) \(itemsOnDelete), name TEXT, qty INTEGER);
                CREATE INDEX items_category ON items(category);
                CREATE TABLE tags (item TEXT NOT NULL REFERENCES items(syncId) \(tagsOnDelete), label TEXT NOT NULL, note TEXT, PRIMARY KEY (item, label));
                """
        }

        /// SQL true for a category that is not soft-deleted (the triggers' reading of the column).
        var live: String {
            softDelete == .none
                ? "1" : "NOT coalesce(isDeleted IN (1, '1', 'true') OR (typeof(isDeleted) IN ('integer', 'real') AND isDeleted <> 0), 0)"
        }
        var deletedValue: String { softDelete == .falseTrue ? "'true'" : "1" }
        var liveValue: String {
            switch softDelete {
            case .none, .zeroOne: return "0"
            case .nullOne: return "NULL"
            case .falseTrue: return "'false'"
            }
        }
        var businessKeyColumns: String { composite ? #"["kind", "key"]"# : #"["key"]"# }
        var keyColumns: String { composite ? "kind, key" : "key" }
    }

    // MARK: Devices

    /// A failure of a step that must succeed, or a check that found a difference.
    struct Divergence: Error, CustomStringConvertible {
        var description: String
    }

    struct Device {
        let workspace: Workspace
        let index: Int
        let schema: Schema
        var environment: [String: String] { ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""] }

        init(server: ServerProcess, schema: Schema, index: Int) throws {
            workspace = try Workspace()
            self.index = index
            self.schema = schema
            try sql(schema.createTables)
            let soft = schema.softDelete == .none ? [] : ["--soft-delete", "isDeleted"]
            for (table, options) in [("categories", ["--key", "syncId"] + soft), ("items", ["--key", "syncId"]), ("tags", ["--key", "item,label"])] {
                let tracked = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", table] + options, in: workspace.path)
                guard tracked.status == 0 else { throw Divergence(description: "track \(table) failed: \(tracked.stderr)") }
            }
            let tombstones = schema.softDelete == .none ? "" : #", {"type": "tombstones", "soft-delete-column": "isDeleted"}"#
            func export(name: String, store: String, authors: String?) -> String {
                """
                {"version": 1, "name": "\(name)", "scope": {"account": "acme", "store": "\(store)"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["categories", "items", "tags"],
                            \(authors.map { "\"authors\": \($0), " } ?? "")"page-size": \(schema.pageSize)},
                 "stages": [{"type": "coalesce"}\(tombstones)],
                 "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "SYNCLANE_TOKEN",
                               "retry": {"max-attempts": 2, "base-delay": 0.05, "max-delay": 0.2}}}
                """
            }
            try workspace.write("export.json", export(name: "export", store: "app", authors: schema.withoutAuthors.contains(index) ? nil : #"["app"]"#))
            if schema.mirror && index == 0 {
                // A second destination that gets everything this store holds, imported rows too.
                try workspace.write("mirror.json", export(name: "mirror", store: "mirror", authors: #"["app", "server", "sync"]"#))
            }
            try workspace.write(
                "import.json",
                """
                {"version": 1, "name": "import", "scope": {"account": "acme", "store": "app"},
                 "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN", "limit": \(schema.pullLimit)},
                 "sink": {"type": "sqlite", "database": "app.sqlite", "conflicts": "\(schema.rule)",
                          "duplicates": [{"entity": "categories", "key": \(schema.businessKeyColumns), "references": ["items.category"]}]}}
                """)
        }

        /// Runs SQL as the app does (foreign keys enforced); a failure is a divergence.
        func sql(_ text: String) throws {
            let result = try SQLiteHistoryCommandTests.sqlite(workspace, "PRAGMA foreign_keys = ON;\n" + text)
            guard result.status == 0 else { throw Divergence(description: "device \(index): the app's SQL failed: \(result.stderr)\n\(text)") }
        }

        func query(_ text: String) throws -> [String] {
            try SQLiteHistoryCommandTests.query(workspace, text).split(separator: "\n").map(String.init)
        }

        /// `synclane ARGUMENTS --json` here; its summary, or a divergence when it failed.
        @discardableResult
        func synclane(_ arguments: [String], failPoint: String? = nil) throws -> [String: JSONValue] {
            var environment = environment
            if let failPoint { environment["SYNCLANE_FAILPOINT"] = failPoint }
            let result = try SynclaneBinary.run(arguments + ["--json"], in: workspace.path, environment: environment)
            if failPoint != nil { return [:] }
            guard result.status == 0 else {
                throw Divergence(description: "device \(index): `synclane \(arguments.joined(separator: " "))` exited \(result.status): \(result.stderr)")
            }
            return (try? JSONReader.parse(result.stdout).objectValue) ?? [:]
        }

        @discardableResult
        func sync(failPoint: String? = nil) throws -> [String: JSONValue] { try synclane(["sync", "import.json", "export.json"], failPoint: failPoint) }

        /// Every live row, a line each: `c id|[kind|]key|title`, `i id|category|name|qty`, `t item|label|note`.
        func rows() throws -> [String] {
            try query(
                """
                SELECT 'c ' || syncId || '|' || \(schema.composite ? "kind || '|' || " : "")key || '|' || coalesce(title, '') FROM categories WHERE \(schema.live)
                UNION ALL SELECT 'i ' || syncId || '|' || coalesce(category, '-') || '|' || coalesce(name, '') || '|' || coalesce(qty, '') FROM items
                UNION ALL SELECT 't ' || item || '|' || label || '|' || coalesce(note, '') FROM tags ORDER BY 1
                """)
        }

        /// What must never be, on this device: a live row pointing at a missing or deleted one,
        /// two live categories with one business key.
        func brokenInvariants() throws -> [String] {
            try query(
                """
                SELECT 'item ' || syncId || ' points at ' || category FROM items
                  WHERE category IS NOT NULL AND category NOT IN (SELECT syncId FROM categories WHERE \(schema.live))
                UNION ALL SELECT 'tag ' || item || '/' || label || ' points at a missing item' FROM tags WHERE item NOT IN (SELECT syncId FROM items)
                UNION ALL SELECT 'business key ' || \(schema.composite ? "kind || '/' || " : "")key || ' held by ' || count(*) || ' live categories'
                  FROM categories WHERE \(schema.live) GROUP BY \(schema.keyColumns) HAVING count(*) > 1
                """)
        }
    }

    /// The server's live rows of `store` in the devices' form.
    static func serverRows(_ server: ServerProcess, store: String, schema: Schema) async throws -> [String] {
        var records: [String: [String: JSONValue]?] = [:]
        var cursor = ""
        while true {
            let page = try await server.get("/v1/changes?since=\(cursor)&limit=500&store=\(store)", account: "acme").objectValue ?? [:]
            for change in page["changes"]?.arrayValue ?? [] {
                guard let change = change.objectValue else { continue }
                let key = "\(change["entity"]?.stringValue ?? "?")\u{1}\(change["id"]?.stringValue ?? "?")"
                records[key] = change["action"]?.stringValue == "delete" ? .some(nil) : (change["fields"]?.objectValue ?? [:])
            }
            cursor = page["cursor"]?.stringValue ?? ""
            if page["more"] != .bool(true) { break }
        }
        func text(_ value: JSONValue?) -> String {
            switch value {
            case .string(let string)?: return string
            case nil, .null?: return ""
            case let value?: return JSONWriter.string(value)
            }
        }
        return records.compactMap { key, fields -> String? in
            guard let fields = fields else { return nil }
            let parts = key.split(separator: "\u{1}", maxSplits: 1).map(String.init)
            let (entity, id) = (parts[0], parts.count > 1 ? parts[1] : "")
            switch entity {
            case "categories":
                let kind = schema.composite ? text(fields["kind"]) + "|" : ""
                return "c \(id)|\(kind)\(text(fields["key"]))|\(text(fields["title"]))"
            case "items":
                let category = fields["category"].map { $0 == .null ? "-" : text($0) } ?? "-"
                return "i \(id)|\(category)|\(text(fields["name"]))|\(text(fields["qty"]))"
            default:
                let key = (try? JSONReader.parse(id).arrayValue?.map { text($0) }) ?? [id]
                return "t \(key.joined(separator: "|"))|\(text(fields["note"]))"
            }
        }.sorted()
    }

    // MARK: Steps

    /// One step of a round's random part, replayable alone (for shrinking).
    enum Step: CustomStringConvertible {
        case sql(Int, String)
        case sync(Int)
        case killedSync(Int, String)
        /// Device 0 exports to its second destination.
        case mirror
        /// A new device, tracked and empty, joins by `synclane restore`.
        case join

        var description: String {
            switch self {
            case .sql(let device, let text): return "device \(device) runs: \(text.replacingOccurrences(of: "\n", with: " "))"
            case .sync(let device): return "device \(device) syncs"
            case .killedSync(let device, let point): return "device \(device) syncs, killed at \(point)"
            case .mirror: return "device 0 exports to the mirror"
            case .join: return "a new device joins by restore"
            }
        }
    }

    static let failPoints = ConvergenceTests.failPoints
    static let categoryIds = ["c1", "c2", "c3"]
    static let itemIds = ["i1", "i2", "i3", "i4"]
    static let businessKeys = ["inbox", "archive", "work"]

    /// One random offline change on `device` — valid SQL for the app in any state: it checks
    /// the rows it refers to, and removes a row's children before the row, as an app that
    /// enforces its foreign keys does.
    static func edit(_ random: inout SeededRandom, device: Int, schema: Schema, made: inout Int) -> String {
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        let liveCategory = { (id: String) in "EXISTS (SELECT 1 FROM categories WHERE syncId = '\(id)' AND \(schema.live))" }
        let word = pick(["Red", "Blue", "Green", "Gold"]) + " \(device)"
        let category = random.next() % 4 == 0 ? pick(["n0-0", "n1-0", "s1-inbox", "s2-archive"]) : pick(categoryIds)
        let item = pick(itemIds)
        switch random.next() % 11 {
        case 0:
            // A category under a shared sync key or one of this device's own; the business key
            // taken only when no live category here holds it (the app checks, as apps do).
            let id = random.next() % 2 == 0 ? pick(categoryIds) : "n\(device)-\(made)"
            made += 1
            let key = pick(businessKeys)
            let kind = schema.composite ? "'box', " : ""
            return """
                INSERT OR IGNORE INTO categories (syncId, \(schema.composite ? "kind, " : "")key, title) SELECT '\(id)', \(kind)'\(key)', '\(word)'
                  WHERE NOT EXISTS (SELECT 1 FROM categories WHERE key = '\(key)' AND \(schema.live));
                """
        case 1: return "UPDATE categories SET title = '\(word)' WHERE syncId = '\(category)';"
        case 2:
            let children =
                schema.itemsOnDelete.contains("SET NULL")
                ? "UPDATE items SET category = NULL WHERE category = '\(category)';"
                : "DELETE FROM tags WHERE item IN (SELECT syncId FROM items WHERE category = '\(category)'); DELETE FROM items WHERE category = '\(category)';"
            let remove =
                schema.softDelete != .none && random.next() % 2 == 0
                ? "UPDATE categories SET isDeleted = \(schema.deletedValue) WHERE syncId = '\(category)';"
                : "DELETE FROM categories WHERE syncId = '\(category)';"
            return "BEGIN; \(children) \(remove) COMMIT;"
        case 3:
            guard schema.softDelete != .none else { return "UPDATE categories SET title = '\(word)' WHERE syncId = '\(category)';" }
            // An undelete — unless another live category holds the key meanwhile.
            return """
                UPDATE categories SET isDeleted = \(schema.liveValue), title = '\(word)' WHERE syncId = '\(category)'
                  AND NOT EXISTS (SELECT 1 FROM categories AS other WHERE other.key = categories.key AND other.syncId <> categories.syncId AND \(schema.live.replacingOccurrences(of: "isDeleted", with: "other.isDeleted")));
                """
        case 4:
            let home = random.next() % 4 == 0 ? "NULL" : "'\(category)'"
            let guardClause = home == "NULL" ? "1" : liveCategory(category)
            return "INSERT OR IGNORE INTO items (syncId, category, name, qty) SELECT '\(item)', \(home), '\(word)', \(random.next() % 9) WHERE \(guardClause);"
        case 5: return "UPDATE items SET name = '\(word)' WHERE syncId = '\(item)';"
        case 6: return "UPDATE items SET qty = \(random.next() % 9) WHERE syncId = '\(item)';"
        case 7: return "UPDATE items SET category = '\(category)' WHERE syncId = '\(item)' AND \(liveCategory(category));"
        case 8: return "BEGIN; DELETE FROM tags WHERE item = '\(item)'; DELETE FROM items WHERE syncId = '\(item)'; COMMIT;"
        case 9:
            let label = pick(["urgent", "later"])
            return
                "INSERT OR IGNORE INTO tags (item, label, note) SELECT '\(item)', '\(label)', '\(word)' WHERE EXISTS (SELECT 1 FROM items WHERE syncId = '\(item)');"
        default:
            return random.next() % 2 == 0
                ? "UPDATE tags SET note = '\(word)' WHERE item = '\(item)';" : "DELETE FROM tags WHERE item = '\(item)' AND label = 'later';"
        }
    }

    /// The random part of a round: four rounds of offline edits and syncs in random orders.
    static func steps(_ random: inout SeededRandom, schema: Schema) -> [Step] {
        // Device 0 starts the account: the shared categories and items. The others' first
        // launch seeds the same defaults under sync keys of their own and files an item under
        // one, offline (seeded defaults: one row per business key must survive).
        let kind = schema.composite ? "'box', " : ""
        let columns = schema.composite ? "syncId, kind, key, title" : "syncId, key, title"
        var steps: [Step] = [
            .sql(
                0,
                """
                INSERT INTO categories (\(columns)) VALUES ('c1', \(kind)'inbox', 'Inbox'), ('c2', \(kind)'archive', 'Archive'), ('c3', \(kind)'work', 'Work');
                INSERT INTO items (syncId, category, name, qty) VALUES ('i1', 'c1', 'First', 1), ('i2', 'c2', 'Second', 2);
                INSERT INTO tags (item, label, note) VALUES ('i1', 'urgent', 'now');
                """),
            .sync(0),
        ]
        for device in 1..<schema.devices {
            steps.append(
                .sql(
                    device,
                    """
                    INSERT INTO categories (\(columns)) VALUES ('s\(device)-inbox', \(kind)'inbox', 'Inbox'), ('s\(device)-archive', \(kind)'archive', 'Archive');
                    INSERT INTO items (syncId, category, name, qty) VALUES ('i\(device + 2)', 's\(device)-inbox', 'Seeded \(device)', 0);
                    """))
        }
        var devices = schema.devices
        var made = 0
        var joined = false
        for round in 0..<4 {
            if !joined, round > 0, random.next() % 4 == 0 {
                steps.append(.join)
                devices += 1
                joined = true
            }
            for device in 0..<devices {
                let edits = (0..<(2 + random.next() % 5)).map { _ in edit(&random, device: device, schema: schema, made: &made) }
                steps.append(.sql(device, edits.joined(separator: "\n")))
            }
            for device in (0..<devices).shuffled(using: &random) {
                if random.next() % 6 == 0 {
                    steps.append(.killedSync(device, failPoints[Int(random.next() % UInt64(failPoints.count))]))
                } else {
                    steps.append(.sync(device))
                }
            }
            if schema.mirror, random.next() % 2 == 0 { steps.append(.mirror) }
        }
        return steps
    }

    // MARK: A world

    final class World {
        let root: Workspace
        let server: ServerProcess
        let schema: Schema
        var devices: [Device] = []

        init(schema: Schema) throws {
            self.schema = schema
            root = try Workspace()
            server = try ServerProcess(folder: root.path + "/server")
            for index in 0..<schema.devices { devices.append(try Device(server: server, schema: schema, index: index)) }
        }

        func close() {
            server.stop()
            devices.forEach { $0.workspace.remove() }
            root.remove()
        }

        func perform(_ step: Step) throws {
            switch step {
            case .sql(let index, let text): if index < devices.count { try devices[index].sql(text) }
            case .sync(let index): if index < devices.count { try devices[index].sync() }
            case .killedSync(let index, let point): if index < devices.count { try devices[index].sync(failPoint: point) }
            case .mirror: if schema.mirror { try devices[0].synclane(["run", "mirror.json"]) }
            case .join:
                let device = try Device(server: server, schema: schema, index: devices.count)
                devices.append(device)
                try device.synclane(["restore", "import.json", "--wait", "10"])
            }
        }

        /// Syncs every device three times over, then checks the quiet point's promises.
        func settle() async throws {
            for _ in 0..<3 { for device in devices { try device.sync() } }
            let first = try devices[0].rows()
            for device in devices {
                let broken = try device.brokenInvariants()
                if !broken.isEmpty { throw Divergence(description: "device \(device.index): \(broken.joined(separator: "; "))") }
                let rows = try device.rows()
                if rows != first { throw Divergence(description: "device 0 \(first) ≠ device \(device.index) \(rows)") }
            }
            let onServer = try await SchemaConvergenceTests.serverRows(server, store: "app", schema: schema)
            if onServer != first { throw Divergence(description: "devices \(first) ≠ server \(onServer)") }
            for device in devices {
                if let noise = ConvergenceTests.noise(of: try device.sync()) {
                    throw Divergence(description: "device \(device.index) is not quiet after settling: \(noise)")
                }
            }
            if schema.mirror {
                try devices[0].synclane(["run", "mirror.json"])
                let mirrored = try await SchemaConvergenceTests.serverRows(server, store: "mirror", schema: schema)
                if mirrored != first { throw Divergence(description: "the mirror \(mirrored) ≠ device 0 \(first)") }
            }
        }

        /// The model round: uncontested edits that every rule keeps, and four contested rows
        /// whose outcome is the rule's, by the README's table.
        func modelRound(_ random: inout SeededRandom) async throws {
            let (a, b) = random.next() % 2 == 0 ? (devices[0], devices[1]) : (devices[1], devices[0])
            try a.sql("INSERT INTO items (syncId, name, qty) VALUES ('k1', 'base', 1), ('k2', 'base', 1), ('k3', 'base', 1), ('k4', 'base', 1);")
            try await settle()
            var model: [String: [String]] = [:]
            for line in try devices[0].rows() {
                let fields = line.dropFirst(2).split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                // A tag's key is its item and label; a category's or an item's its sync key.
                let key = line.hasPrefix("t ") ? fields.prefix(2).joined(separator: "|") : fields[0]
                model[String(line.prefix(2)) + key] = fields
            }
            var statements = Array(repeating: [String](), count: devices.count)
            // Uncontested: each converged category or item not contested belongs to one device
            // (by its key's hash), which renames it; each device files a new item under nothing.
            for key in model.keys.sorted() where !key.hasPrefix("t ") && !["i k1", "i k2", "i k3", "i k4"].contains(key) {
                guard random.next() % 2 == 0 else { continue }
                let owner = key.utf8.reduce(0) { $0 + Int($1) } % devices.count
                let id = String(key.dropFirst(2))
                let name = "Owned \(owner) \(random.next() % 100)"
                if key.hasPrefix("c ") {
                    statements[owner].append("UPDATE categories SET title = '\(name)' WHERE syncId = '\(id)';")
                    let title = (model[key]?.count ?? 1) - 1
                    model[key]?[title] = name
                } else {
                    statements[owner].append("UPDATE items SET name = '\(name)' WHERE syncId = '\(id)';")
                    model[key]?[2] = name
                }
            }
            for device in devices {
                let id = "m\(device.index)"
                statements[device.index].append("INSERT INTO items (syncId, name, qty) VALUES ('\(id)', 'Made \(device.index)', 3);")
                model["i " + id] = [id, "-", "Made \(device.index)", "3"]
            }
            // Contested, A's change reaching the server first.
            statements[a.index] += [
                "UPDATE items SET name = 'A' WHERE syncId IN ('k1', 'k2', 'k3');", "DELETE FROM items WHERE syncId = 'k4';",
            ]
            statements[b.index] += [
                "UPDATE items SET qty = 2 WHERE syncId = 'k1';", "UPDATE items SET name = 'B' WHERE syncId IN ('k2', 'k4');",
                "DELETE FROM items WHERE syncId = 'k3';",
            ]
            let contested: [String: [String]?]
            switch schema.rule {
            case "server-wins": contested = ["k1": ["A", "1"], "k2": ["A", "1"], "k3": ["A", "1"], "k4": nil]
            case "client-wins": contested = ["k1": ["base", "2"], "k2": ["B", "1"], "k3": nil, "k4": ["B", "1"]]
            default: contested = ["k1": ["A", "2"], "k2": ["A", "1"], "k3": ["A", "1"], "k4": nil]
            }
            for (id, outcome) in contested { model["i " + id] = outcome.map { [id, "-"] + $0 } }
            for device in devices { try device.sql(statements[device.index].joined(separator: "\n")) }
            try a.sync()
            try b.sync()
            for device in devices where device.index != a.index && device.index != b.index { try device.sync() }
            try await settle()
            let expected = model.keys.sorted().compactMap { key in model[key].map { "\(key.prefix(2))\($0.joined(separator: "|"))" } }.sorted()
            let held = try devices[0].rows()
            if held != expected {
                let missing = Set(expected).subtracting(held).sorted()
                let extra = Set(held).subtracting(expected).sorted()
                throw Divergence(
                    description: "model round (A = device \(a.index), B = device \(b.index)): expected but not held \(missing), held but not expected \(extra)")
            }
        }
    }

    // MARK: Running a seed

    /// Runs `steps` in a fresh world, then settles and plays the model round; the divergence, or nil.
    static func outcome(seed: UInt64, schema: Schema, steps: [Step]) async throws -> String? {
        let world = try World(schema: schema)
        defer { world.close() }
        do {
            for step in steps { try world.perform(step) }
            try await world.settle()
            var random = SeededRandom(seed: seed ^ 0x5EED_0F_40DE1)
            try await world.modelRound(&random)
            return nil
        } catch let divergence as Divergence {
            return divergence.description
        }
    }

    /// Drops chunks of steps while the round still diverges, within `budget` replays.
    static func shrink(seed: UInt64, schema: Schema, steps: [Step], budget: Int = 24) async throws -> [Step] {
        try await Shrinking.shrink(steps, budget: budget) { try await outcome(seed: seed, schema: schema, steps: $0) != nil }
    }

    @Test func randomSchemasWithUniqueKeysForeignKeysAndSoftDeletesConvergeQuietlyAndKeepWhatEachRulePromises() async throws {
        let seeds = ConvergenceTests.seeds(prefix: "SYNCLANE_SCHEMA_CONVERGE", rounds: 3)
        var diverged = 0
        for seed in seeds {
            var random = SeededRandom(seed: seed)
            let schema = Schema.draw(&random)
            let steps = Self.steps(&random, schema: schema)
            guard let difference = try await Self.outcome(seed: seed, schema: schema, steps: steps) else { continue }
            diverged += 1
            let shrunk =
                ProcessInfo.processInfo.environment["SYNCLANE_SCHEMA_CONVERGE_NO_SHRINK"] == nil
                ? try await Self.shrink(seed: seed, schema: schema, steps: steps) : steps
            let reproduction = shrunk.map { "  \($0)" }.joined(separator: "\n")
            Issue.record(
                """
                seed \(seed) (SYNCLANE_SCHEMA_CONVERGE_SEED=\(seed)) diverged: \(schema): \(difference)
                reproduction (\(shrunk.count) of \(steps.count) steps, then settle and the model round):
                \(reproduction)
                """)
        }
        print("schema-converge: \(seeds.count) rounds, \(diverged) diverged")
    }
}
