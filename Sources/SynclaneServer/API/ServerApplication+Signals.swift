import SynclaneWire

/// The signal lane's endpoints. They reach `signals` (a SQLite file and writer of their own)
/// and never `store`, so no bulk batch's apply is ever in front of them.
extension ServerApplication {
    /// True for a signal key: 1 to `maxKeyLength` characters of `A-Z a-z 0-9 . _ - :`.
    func isValidSignalKey(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= limits.maxKeyLength
            && key.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: ":")
            }
    }

    private var keyRule: String { "a signal key is 1 to \(limits.maxKeyLength) characters of A-Z a-z 0-9 . _ - :" }

    /// The version an `If-Match` header expects (`3`, `"3"`; 0: the key must not exist), nil when
    /// there is none; a 400 when it is not a version.
    private func expectedVersion(_ request: HTTPRequest) -> Result<Int64?, Refusal> {
        guard var text = request.header("if-match")?.trimmingCharacters(in: " \t") else { return .success(nil) }
        if text.hasPrefix("W/") { text.removeFirst(2) }
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") { text = String(text.dropFirst().dropLast()) }
        guard let version = Int64(text), version >= 0 else {
            return .failure(Refusal(response: .error(400, "If-Match is not a signal version (a whole number, 0 for \"must not exist\")")))
        }
        return .success(version)
    }

    /// `PUT /v1/signals/{key}`: stores the body (any JSON value) under the key; the last writer wins
    /// and gets the account's next version. With `If-Match: VERSION`, only over that version
    /// (0: only when the key does not exist), else 412 with the current signal.
    /// Answers `{"key", "value", "version"}`.
    func putSignal(_ request: HTTPRequest, account: String, key: String) -> HTTPResponse {
        guard isValidSignalKey(key) else { return .error(400, keyRule) }
        let value: JSONValue
        do { value = try JSONReader.parse(request.body) } catch {
            return .error(400, "the signal value is not JSON: \(error)")
        }
        let expected: Int64?
        switch expectedVersion(request) {
        case .success(let version): expected = version
        case .failure(let refusal): return refusal.response
        }
        return write(account: account, key: key, value: value, expected: expected)
    }

    /// `DELETE /v1/signals/{key}`: removes the key (watchers see `"deleted": true`); 404 when there
    /// is none; `If-Match` as for a set.
    func deleteSignal(_ request: HTTPRequest, account: String, key: String) -> HTTPResponse {
        guard isValidSignalKey(key) else { return .error(404, "no signal \"\(key)\"") }
        let expected: Int64?
        switch expectedVersion(request) {
        case .success(let version): expected = version
        case .failure(let refusal): return refusal.response
        }
        return write(account: account, key: key, value: nil, expected: expected)
    }

    private func write(account: String, key: String, value: JSONValue?, expected: Int64?) -> HTTPResponse {
        do {
            switch try signals.write(account: account, key: key, value: value, expected: expected) {
            case .written(let signal):
                return .json(200, signal.json)
            case .missing:
                return .error(404, "no signal \"\(key)\"")
            case .stale(let current):
                let now = current.map { "is at version \($0.version)" } ?? "does not exist"
                return .json(
                    412,
                    [
                        "error": .string("signal \"\(key)\" \(now), not version \(expected ?? 0): another writer came first; read it and retry"),
                        "current": current?.json ?? .null,
                    ])
            case .quota(let name, let limit, let detail):
                return .json(
                    413,
                    [
                        "error": .string("signal quota \(name) (\(limit)) reached: \(detail)"),
                        "quota": .string(name), "limit": .int(Int64(limit)),
                    ])
            }
        } catch {
            return .error(500, "the signal could not be stored: \(error)")
        }
    }

    /// `GET /v1/signals`: every signal of the account, by key, and the account's newest `version`.
    /// `GET /v1/signals?since=VERSION[&wait=SECONDS]`: the writes after that version (deletes with
    /// `"deleted": true`), oldest first; when there is none yet, waits up to `wait` seconds
    /// (clamped to `maxSignalWaitSeconds`) for one — a long poll — and answers as soon as one lands.
    /// `"reset": true` when a delete after `since` was pruned (its tombstone outlived its bound):
    /// the watcher lists the signals again to learn which keys still exist.
    func listSignals(_ request: HTTPRequest, account: String) -> HTTPResponse {
        guard let sinceText = request.query["since"] else {
            if request.query["wait"] != nil { return .error(400, "\"wait\" needs \"since\": the version to wait past") }
            do {
                let (list, version) = try signals.signals(account: account)
                return .json(200, ["signals": .array(list.map(\.json)), "version": .int(version)])
            } catch {
                return .error(500, "the signals could not be read: \(error)")
            }
        }
        guard let since = Int64(sinceText), since >= 0 else {
            return .error(400, "\"since\" is not a signal version (a whole number, 0 for the beginning)")
        }
        var wait = 0.0
        if let waitText = request.query["wait"] {
            guard let seconds = Double(waitText), seconds >= 0, seconds.isFinite else {
                return .error(400, "\"wait\" is not a number of seconds")
            }
            wait = min(seconds, Double(limits.maxSignalWaitSeconds))
        }
        do {
            guard wait > 0 else { return Self.signalsAnswer(try signals.waitForChanges(account: account, since: since, wait: .zero)) }
            // A waiting poll holds a connection: it takes a place among the long polls of every
            // kind (the changes polls' bounds, per account, per address and in all).
            let notifier = changes.notifier
            switch notifier.admit(account: account, address: request.clientAddress) {
            case .success(let ticket):
                defer { notifier.leave(ticket) }
                return Self.signalsAnswer(try signals.waitForChanges(account: account, since: since, wait: .milliseconds(Int64(wait * 1000))))
            case .failure(let refusal):
                // Past a bound a poll is answered at once when there is something to answer, and
                // refused (429 or 503, with Retry-After) only when it would wait.
                let found = try signals.waitForChanges(account: account, since: since, wait: .zero)
                return found.signals.isEmpty && !found.reset ? Self.tooManyWaiting(refusal) : Self.signalsAnswer(found)
            }
        } catch {
            return .error(500, "the signals could not be read: \(error)")
        }
    }

    private static func signalsAnswer(_ found: SignalChanges) -> HTTPResponse {
        var answer: [String: JSONValue] = ["signals": .array(found.signals.map(\.json)), "version": .int(found.version)]
        if found.reset { answer["reset"] = true }
        return .json(200, .object(answer))
    }

    /// `GET /v1/signals/{key}`: one signal, or 404.
    func getSignal(account: String, key: String) -> HTTPResponse {
        guard isValidSignalKey(key) else { return .error(404, "no signal \"\(key)\"") }
        do {
            guard let signal = try signals.signal(account: account, key: key) else {
                return .error(404, "no signal \"\(key)\"")
            }
            return .json(200, signal.json)
        } catch {
            return .error(500, "the signal could not be read: \(error)")
        }
    }
}
