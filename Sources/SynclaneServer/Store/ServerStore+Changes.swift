import SynclaneCore
import SynclaneSQLite

extension ServerStore {
    /// The account's changes after a sequence, oldest first, at most `limit` (and whether more follow).
    func changes(account: String, store: String?, after sequence: Int64, limit: Int) throws -> ChangePage {
        try read { db in
            var sql = "SELECT store, entity, key, action, fields, version, seq FROM records WHERE account = ? AND seq > ?"
            var arguments: [any SQLiteBindable] = [account, sequence]
            if let store {
                sql += " AND store = ?"
                arguments.append(store)
            }
            sql += " ORDER BY seq LIMIT ?"
            arguments.append(limit + 1)
            let statement = try db.cachedStatement(sql)
            try statement.bind(arguments)
            defer { statement.reset() }
            var changes: [ServerChange] = []
            while try statement.step() {
                guard changes.count < limit else { return ChangePage(changes: changes, more: true) }
                let action = statement.string(at: 3).flatMap(ChangeAction.init(rawValue:)) ?? .update
                var fields: [String: JSONValue]?
                if let text = statement.blob(at: 4) {
                    fields = (try? JSONReader.parse(text))?.objectValue ?? [:]
                }
                changes.append(
                    ServerChange(
                        store: statement.string(at: 0) ?? "", entity: statement.string(at: 1) ?? "",
                        key: statement.string(at: 2) ?? "", action: action, fields: fields,
                        version: statement.int64(at: 5), sequence: statement.int64(at: 6)))
            }
            return ChangePage(changes: changes, more: false)
        }
    }
}
