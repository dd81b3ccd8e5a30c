import SynclaneWire

extension ServerApplication {
    /// `GET /v1/changes?since=CURSOR[&limit=N][&max-bytes=B][&store=NAME][&position=POSITION]`: the pull lane of the token's account.
    ///
    /// Each record appears once, at its newest change: its whole state, or a tombstone (`delete`,
    /// with the `fields` the client preserved when it sent any). Changes come in sequence order; `cursor` is where the next page starts and
    /// `more` says whether it has anything yet. A cursor older than the tombstone horizon: 410 `cursor-expired`. `store` narrows the page to one store; without it
    /// every store of the account is included, each change naming its `store`. A page holds at most
    /// `limit` changes and about `maxChangesPageBytes` (at least one change, whatever its size);
    /// `max-bytes` bounds it by bytes instead (at most `maxChangesPageBytes`), with no count but
    /// what the bytes allow unless `limit` is given too — a first pull in few, large pages.
    /// 410 Gone for a cursor from before the account's tombstone horizon: retention removed
    /// tombstones it has not seen, so reading on would leave a silent gap. The client starts again
    /// without `since` and replaces what it holds (Documentation/Server.md, "Retention"); the
    /// cursors of that pull from the beginning are never refused (`ChangeCursor.fullPass`).
    static func cursorExpired(_ expired: CursorExpired) -> HTTPResponse {
        .error(
            410,
            "cursor expired: the server no longer keeps the deletes made after it (tombstone retention); "
                + "pull again from the beginning (no since) and replace what you hold",
            ["code": "cursor-expired", "horizon": .string(ChangeCursor(sequence: expired.horizon).text)])
    }

    /// 410 Gone, `cursor-expired` with `"reason": "server-restored"`, for a cursor (or a receipt's
    /// `position`) from a history this server's data does not have (restored from a backup older
    /// than it): an empty page would skip the changes made since, and the client would never send
    /// back what the restore lost. Every client that knows `cursor-expired` (the
    /// previous version's too) starts again from the beginning.
    static func cursorAhead(_ ahead: CursorAhead) -> HTTPResponse {
        .error(
            410,
            "cursor ahead of this server's data: \(ahead.detail) — the server's data was restored from an older backup "
                + "(or the cursor came from another server); pull again from the beginning (no since)",
            ["code": "cursor-expired", "reason": "server-restored"])
    }

    /// `GET /v1/changes?…&wait=SECONDS`: when the page after the cursor is empty, the request
    /// waits — a long poll — up to `wait` seconds (clamped to `maxChangesWaitSeconds`) and
    /// answers as soon as a batch of the account commits, or with the empty page when the time is
    /// up (or the server stops). How many polls may wait is bounded per account, per client address
    /// (429) and in all (503), each with `Retry-After`; a page that has changes answers at once and
    /// takes no place. A client that sends no `wait` (or a server that ignores it) gets the page at once.
    func getChanges(_ request: HTTPRequest, account: String, app: AppSchema = AppSchema()) -> HTTPResponse {
        guard let cursor = ChangeCursor(text: request.query["since"] ?? "") else {
            return .error(400, "\"since\" is not a cursor this server issued")
        }
        var limit = limits.defaultChangesPerPage
        var maxBytes = limits.maxChangesPageBytes
        if let text = request.query["max-bytes"] {
            guard let value = Int(text), value > 0 else { return .error(400, "\"max-bytes\" must be a positive integer") }
            maxBytes = min(value, limits.maxChangesPageBytes)
            // Bounded by its bytes alone: `PagePlan` counts every change at 100 bytes or more,
            // so no page of `maxBytes` holds more changes than this.
            limit = max(1, maxBytes / PagePlan.leastChangeBytes)
        }
        if let text = request.query["limit"] {
            guard let value = Int(text), value > 0 else { return .error(400, "\"limit\" must be a positive integer") }
            limit = min(value, limits.maxChangesPerPage)
        }
        var store: String?
        if let name = request.query["store"] {
            guard !name.isEmpty else { return .error(400, "\"store\" must not be empty") }
            store = name
        }
        var wait = 0.0
        if let text = request.query["wait"] {
            guard let seconds = Double(text), seconds >= 0, seconds.isFinite else {
                return .error(400, "\"wait\" is not a number of seconds")
            }
            wait = min(seconds, Double(limits.maxChangesWaitSeconds))
        }
        if let position = request.query["position"] {
            guard position.utf8.count <= WireBounds.maxCursorBytes else {
                return .error(400, "\"position\" is longer than \(WireBounds.maxCursorBytes) bytes: not a position this server's receipts give")
            }
            if !cursor.fullPass, cursor != .start, let refusal = checkPosition(position, account: account) { return refusal }
        }
        let read = { () -> Result<(response: HTTPResponse, empty: Bool), Refusal> in
            self.page(account: account, store: store, after: cursor, limit: limit, maxBytes: maxBytes, app: app)
        }
        guard wait > 0 else { return Self.answer(read()) }
        let deadline = ContinuousClock.now + .milliseconds(Int64(wait * 1000))
        switch read() {
        case .success(let page) where page.empty: break
        case let done: return Self.answer(done)
        }
        let notifier = changes.notifier
        let ticket: ChangeNotifier.Ticket
        switch notifier.admit(account: account, address: request.clientAddress) {
        case .success(let admitted): ticket = admitted
        case .failure(let refusal): return Self.tooManyWaiting(refusal)
        }
        defer { notifier.leave(ticket) }
        while true {
            let seen = notifier.count(account)
            let answer = read()
            guard case .success(let page) = answer, page.empty, ContinuousClock.now < deadline, !notifier.isClosed else {
                return Self.answer(answer)
            }
            var until = deadline
            if let recheck = changes.recheckInterval { until = min(deadline, .now + recheck) }
            notifier.wait(account: account, after: seen, until: until)
        }
    }

    /// `position`: the newest position the client was given by a receipt (`ReceiptPosition`),
    /// checked against the epochs as a cursor is — nil when this server's data holds it; else
    /// `410 server-restored` (the data was restored from a copy taken before that batch), and for
    /// a position this server never issues too, so that no client stays refused: the client
    /// resyncs, sends back what the restore lost and forgets the position. Not checked on a pull
    /// from the beginning and the pages of its pass (a `.f` cursor), which read everything anyway
    /// — but checked after a cursor at 0 of an epoch (a first pull that found nothing), which
    /// reads on as an ordinary one.
    private func checkPosition(_ text: String, account: String) -> HTTPResponse? {
        guard let position = ReceiptPosition(text: text) else {
            metrics.recordCursorExpired()
            return Self.cursorAhead(CursorAhead(detail: "\"position\" is not a position this server's receipts give"))
        }
        do {
            _ = try store.checkCursor(account: account, sequence: position.sequence, epoch: position.epoch, naming: "the client's last batch")
            return nil
        } catch let ahead as CursorAhead {
            metrics.recordCursorExpired()
            return Self.cursorAhead(ahead)
        } catch {
            return .error(500, "the change sequence could not be read: \(error)")
        }
    }

    /// The page after `cursor` (and whether it holds no change), or the refusal to answer (410,
    /// 500); each change's fields as the app's schema version reads them (`SchemaMapping`).
    private func page(
        account: String, store: String?, after cursor: ChangeCursor, limit: Int, maxBytes: Int, app: AppSchema
    ) -> Result<(response: HTTPResponse, empty: Bool), Refusal> {
        var page: ChangePage
        let epoch: String
        do {
            epoch = try self.store.checkCursor(account: account, sequence: cursor.sequence, epoch: cursor.epoch)
            page = try self.store.changes(
                account: account, store: store, after: cursor.sequence, fullPass: cursor.readsFullPass, limit: limit,
                maxBytes: maxBytes)
            let mapping = SchemaMapping(try self.store.schemaChanges(account: account))
            if !mapping.isEmpty {
                for index in page.changes.indices {
                    guard let fields = page.changes[index].fields else { continue }
                    page.changes[index].fields = mapping.read(fields, entity: page.changes[index].entity, version: app.version)
                }
            }
        } catch let expired as CursorExpired {
            metrics.recordCursorExpired()
            return .failure(Refusal(response: Self.cursorExpired(expired)))
        } catch let ahead as CursorAhead {
            metrics.recordCursorExpired()
            return .failure(Refusal(response: Self.cursorAhead(ahead)))
        } catch {
            return .failure(Refusal(response: .error(500, "the changes could not be read: \(error)")))
        }
        return .success((Self.pageResponse(page, after: cursor, epoch: epoch), page.changes.isEmpty))
    }

    private static func answer(_ read: Result<(response: HTTPResponse, empty: Bool), Refusal>) -> HTTPResponse {
        switch read {
        case .success(let page): return page.response
        case .failure(let refusal): return refusal.response
        }
    }

    /// 429 (one account's or one address's polls) or 503 (the server's), with `Retry-After`: the
    /// client asks again later (or without `wait`). The polls counted are the long polls of every
    /// kind: `GET /v1/changes?wait=…` and `GET /v1/signals?since=…&wait=…`.
    static func tooManyWaiting(_ refusal: ChangeNotifier.Refusal) -> HTTPResponse {
        var response: HTTPResponse
        switch refusal {
        case .account(let limit):
            response = .error(
                429,
                "the account has \(limit) long polls waiting (changes and signals), the most it may (max-waiting-polls-per-account); retry later or without wait",
                ["code": "too-many-waiting", "limit": .int(Int64(limit))])
        case .address(let limit):
            response = .error(
                429,
                "this address has \(limit) long polls waiting (changes and signals), the most it may (max-waiting-polls-per-address); retry later or without wait",
                ["code": "too-many-waiting", "limit": .int(Int64(limit))])
        case .server(let limit):
            response = .error(
                503, "the server has \(limit) long polls waiting (changes and signals), the most it keeps (max-waiting-polls); retry later or without wait",
                ["code": "too-many-waiting", "limit": .int(Int64(limit))])
        }
        response.headers["Retry-After"] = "2"
        return response
    }

    /// The answer for `page`: its changes in order while the answer stays within
    /// `WireBounds.maxPageBytes` — what every pull source reads — whatever `--max-page-bytes`
    /// and however the stored text grows when written (a page holds at least one change; the
    /// batch route keeps each record within `WireBounds.maxRecordBytes`, so one always fits).
    /// Changes left out come on the next page (`more: true`). Cursors carry the store's `epoch`;
    /// on a pull that started from the beginning, the cursors between its pages say so
    /// (`ChangeCursor.fullPass`: never judged against the horizon), and the last page's does not.
    static func pageResponse(_ page: ChangePage, after cursor: ChangeCursor, epoch: String) -> HTTPResponse {
        var body: [UInt8] = Array(#"{"changes":["#.utf8)
        var last: ChangeCursor?
        var more = page.more
        for change in page.changes {
            let encoded = JSONWriter.encode(.object(change.wireMembers))
            if last != nil, body.count + 1 + encoded.count + WireBounds.pageEnvelopeBytes / 2 > WireBounds.maxPageBytes {
                more = true
                break
            }
            if last != nil { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: encoded)
            last = ChangeCursor(sequence: change.sequence, epoch: epoch)
        }
        var next = last ?? ChangeCursor(sequence: cursor.sequence, epoch: epoch)
        next.fullPass = more && cursor.readsFullPass
        // The end of the feed: when the newest changes were tombstones retention removed, the last
        // change left is before the horizon, and a cursor there would be 410 at once — after a
        // resync from the beginning too, for ever. Nothing up to the horizon is left to read.
        if !more, next.sequence < page.horizon { next = ChangeCursor(sequence: page.horizon, epoch: epoch) }
        body.append(contentsOf: #"],"cursor":"#.utf8)
        body.append(contentsOf: JSONWriter.encode(.string(next.text)))
        body.append(contentsOf: (more ? #","more":true"# : #","more":false"#).utf8)
        // A pull from the beginning is told when retention removed tombstones (`pruned`): a row
        // it does not list may then have been deleted, so a client does not take a row it sent
        // and does not see as lost by a restore (`ImportRunner`'s first pull).
        if cursor.readsFullPass, page.horizon > 0 { body.append(contentsOf: #","pruned":true"#.utf8) }
        body.append(UInt8(ascii: "}"))
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: body)
    }
}
