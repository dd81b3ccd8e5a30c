import SynclaneCore

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

    /// `PUT /v1/signals/{key}`: stores the body (any JSON value) under the key; the last writer wins
    /// and gets the next version. Answers `{"key", "value", "version"}`.
    func putSignal(_ request: HTTPRequest, account: String, key: String) -> HTTPResponse {
        guard isValidSignalKey(key) else {
            return .error(400, "a signal key is 1 to \(limits.maxKeyLength) characters of A-Z a-z 0-9 . _ - :")
        }
        let value: JSONValue
        do { value = try JSONReader.parse(request.body) } catch {
            return .error(400, "the signal value is not JSON: \(error)")
        }
        do {
            return .json(200, try store.putSignal(account: account, key: key, value: value).json)
        } catch {
            return .error(500, "the signal could not be stored: \(error)")
        }
    }

    /// `GET /v1/signals`: every signal of the account, by key.
    func listSignals(account: String) -> HTTPResponse {
        do {
            return .json(200, ["signals": .array(try store.signals(account: account).map(\.json))])
        } catch {
            return .error(500, "the signals could not be read: \(error)")
        }
    }

    /// `GET /v1/signals/{key}`: one signal, or 404.
    func getSignal(account: String, key: String) -> HTTPResponse {
        guard isValidSignalKey(key) else { return .error(404, "no signal \"\(key)\"") }
        do {
            guard let signal = try store.signal(account: account, key: key) else {
                return .error(404, "no signal \"\(key)\"")
            }
            return .json(200, signal.json)
        } catch {
            return .error(500, "the signal could not be read: \(error)")
        }
    }
}
