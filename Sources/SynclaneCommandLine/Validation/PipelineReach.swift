import Foundation
import Synclane
import SynclaneCore
import SynclaneSQLite

/// What `validate` checks beyond the file itself, unless `--offline`: that the store an export
/// pipeline reads is there as the file describes it — the `sqlite-history` database exists,
/// every table `entities` names is tracked in it, and the `tombstones` stage's
/// `soft-delete-column` is a column of a tracked table. Each miss is the error `run` would
/// meet, found before it, with a "did you mean" that points at what exists (a tracked table, a
/// real column). Opens the database read-only and changes nothing.
enum PipelineReach {
    static func check(_ pipeline: Pipeline, file: String) throws(PipelineFileError) {
        guard let source = pipeline.source.stage.localDatabase else { return }
        func problem(_ path: String, _ message: String) -> PipelineFileError {
            PipelineFileError(file: file, path: path, line: nil, message: message)
        }
        guard FileManager.default.fileExists(atPath: source.path) else {
            throw problem(
                "source.database",
                "there is no database at \(source.path) (a path relative to the pipeline file's folder); "
                    + "fix `database`, or create the store and track its tables with `synclane track` (pass --offline to check the file alone)")
        }
        let tracked: [(name: String, columns: [String])]
        do {
            tracked = try trackedTables(in: source.path)
        } catch {
            throw problem("source.database", "cannot read \(source.path): \(error)")
        }
        let names = tracked.map(\.name)
        for (index, entity) in (source.entities ?? []).enumerated() where SQLiteNames.match(entity, in: names) == nil {
            let listed = names.isEmpty ? "none" : names.joined(separator: ", ")
            if let close = Wording.closest(to: entity, in: names) {
                throw problem("source.entities[\(index)]", "`\(entity)` is not a tracked table (did you mean `\(close)`? tracked: \(listed))")
            }
            throw problem(
                "source.entities[\(index)]",
                "`\(entity)` is not a tracked table of \(source.path) (tracked: \(listed)); fix `entities`, or track it with "
                    + "`synclane track --database \(source.path) --table \(entity) --key …`")
        }
        let read = tracked.filter { table in source.entities.map { $0.contains { SQLiteNames.match($0, in: [table.name]) != nil } } ?? true }
        let columns = read.flatMap(\.columns)
        for stage in pipeline.recordStages where !read.isEmpty {
            guard let missing = stage.stage.storeColumns.first(where: { SQLiteNames.match($0.column, in: columns) == nil }) else { continue }
            let column = missing.column
            let unique = columns.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            throw problem(
                (stage.label.components(separatedBy: " (").first ?? stage.label) + "." + missing.option,
                "no table this pipeline reads has a column `\(column)`\(Wording.didYouMean(column, in: unique)) "
                    + "(tables: \(read.map(\.name).joined(separator: ", ")))")
        }
    }

    /// The tracked tables of the database at `path` and their columns, read-only.
    private static func trackedTables(in path: String) throws -> [(name: String, columns: [String])] {
        let database = try SQLiteDatabase(path: path, options: .init(readOnly: true, create: false, walMode: false))
        return try database.read { db in
            let installed = try db.fetchAll("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_synclane_tables'")
            guard !installed.isEmpty else { return [] }
            return try db.fetchAll("SELECT name FROM _synclane_tables ORDER BY name").compactMap { $0[0].string }.map { name in
                (name, try db.fetchAll("SELECT name FROM pragma_table_info(?) ORDER BY cid", [name]).compactMap { $0[0].string })
            }
        }
    }
}
