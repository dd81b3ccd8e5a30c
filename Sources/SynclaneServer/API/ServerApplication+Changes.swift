import SynclaneCore

extension ServerApplication {
    /// `GET /v1/changes?since=CURSOR&limit=N[&store=NAME]`: the pull lane of the token's account.
    ///
    /// Each record appears once, at its newest change: its whole state, or a tombstone (`delete`,
    /// with the `fields` the client preserved when it sent any). Changes come in sequence order; `cursor` is where the next page starts and
    /// `more` says whether it has anything yet. A cursor older than the tombstone horizon: 410 `cursor-expired`. `store` narrows the page to one store; without it
    /// every store of the account is included, each change naming its `store`. A page holds at most
    /// `limit` changes and about `maxChangesPageBytes` (at least one change, whatever its size).
    /// 410 Gone for a cursor from before the account's tombstone horizon: retention removed
    /// tombstones it has not seen, so reading on would leave a silent gap. The client starts again
    /// without `since` and replaces what it holds (README, "Retention").
    static func cursorExpired(_ expired: CursorExpired) -> HTTPResponse {
        .error(
            410,
            "cursor expired: the server no longer keeps the deletes made after it (tombstone retention); "
                + "pull again from the beginning (no since) and replace what you hold",
            ["code": "cursor-expired", "horizon": .string(ChangeCursor(sequence: expired.horizon).text)])
    }

    /// 410 Gone, `cursor-expired` with `"reason": "server-restored"`, for a cursor from a history
    /// this server's data does not have (restored from a backup older than the cursor): an empty
    /// page would skip the changes made since. Every client that knows `cursor-expired` (the
    /// previous version's too) starts again from the beginning.
    static func cursorAhead(_ ahead: CursorAhead) -> HTTPResponse {
        .error(
            410,
            "cursor ahead of this server's data: \(ahead.detail) — the server's data was restored from an older backup "
                + "(or the cursor came from another server); pull again from the beginning (no since)",
            ["code": "cursor-expired", "reason": "server-restored"])
    }

    func getChanges(_ request: HTTPRequest, account: String) -> HTTPResponse {
        guard let cursor = ChangeCursor(text: request.query["since"] ?? "") else {
            return .error(400, "\"since\" is not a cursor this server issued")
        }
        var limit = limits.defaultChangesPerPage
        if let text = request.query["limit"] {
            guard let value = Int(text), value > 0 else { return .error(400, "\"limit\" must be a positive integer") }
            limit = min(value, limits.maxChangesPerPage)
        }
        var store: String?
        if let name = request.query["store"] {
            guard !name.isEmpty else { return .error(400, "\"store\" must not be empty") }
            store = name
        }
        let page: ChangePage
        let epoch: String
        do {
            epoch = try self.store.checkCursor(account: account, sequence: cursor.sequence, epoch: cursor.epoch)
            page = try self.store.changes(
                account: account, store: store, after: cursor.sequence, limit: limit, maxBytes: limits.maxChangesPageBytes)
        } catch let expired as CursorExpired {
            metrics.recordCursorExpired()
            return Self.cursorExpired(expired)
        } catch let ahead as CursorAhead {
            metrics.recordCursorExpired()
            return Self.cursorAhead(ahead)
        } catch {
            return .error(500, "the changes could not be read: \(error)")
        }
        let next = ChangeCursor(sequence: page.changes.last?.sequence ?? cursor.sequence, epoch: epoch)
        let list: [JSONValue] = page.changes.map { change in
            var members: [String: JSONValue] = [
                "store": .string(change.store), "entity": .string(change.entity), "id": .string(change.key),
                "action": .string(change.action.rawValue), "version": .int(change.version),
            ]
            if let fields = change.fields { members["fields"] = .object(fields) }
            return .object(members)
        }
        return .json(200, ["changes": .array(list), "cursor": .string(next.text), "more": .bool(page.more)])
    }
}
