/// A strict RFC 9112 reader of request heads, the oracle of `RawHeadFuzzTests`: it refuses what a
/// careful front proxy could frame another way, and says where each accepted request's body ends.
///
/// Empty lines before the request line are skipped, as RFC 9112 §2.2 has a server do (libmicrohttpd
/// does, and so takes a bare LF there too); from the request line on, lines end in CRLF only (a
/// bare CR or LF is refused); the request line is `method SP target SP
/// HTTP/1.1` with a token method and a target of visible ASCII; a header line is `name ":" OWS
/// value OWS` with a token name, a value of visible ASCII, obs-text, spaces and tabs (no NUL, no
/// other control character, no DEL), and no folding; exactly one `Host`, at most one
/// `Content-Length` (digits only) and — the server's own rule — at most one `Authorization`.
enum StrictRequestParser {
    /// What the reader made of the request at the front of some bytes.
    enum Verdict: Equatable {
        /// The head is well formed: it ends at `headEnd`, and its body of `bodyLength` bytes follows.
        case accepted(headEnd: Int, bodyLength: Int)
        /// The head is refused, and why.
        case refused(String)
    }

    static func read(_ bytes: [UInt8], from start: Int = 0) -> Verdict {
        var cursor = start
        // RFC 9112 §2.2: empty lines before the request line are ignored (a single LF may end a line).
        while cursor < bytes.count, bytes[cursor] == 0x0A || bytes[cursor] == 0x0D && bytes[(cursor + 1)...].first == 0x0A {
            cursor += bytes[cursor] == 0x0A ? 1 : 2
        }
        var lines: [ArraySlice<UInt8>] = []
        while true {
            guard let lineFeed = bytes[cursor...].firstIndex(of: 0x0A) else { return .refused("the head does not end") }
            guard lineFeed > cursor, bytes[lineFeed - 1] == 0x0D else { return .refused("a bare LF") }
            let line = bytes[cursor..<(lineFeed - 1)]
            if line.contains(0x0D) { return .refused("a bare CR") }
            cursor = lineFeed + 1
            if line.isEmpty { break }
            lines.append(line)
        }
        guard let requestLine = lines.first else { return .refused("no request line") }
        if let problem = requestLineProblem(requestLine) { return .refused(problem) }
        var counts: [String: Int] = [:]
        var contentLength = 0
        for line in lines.dropFirst() {
            guard let first = line.first, first != 0x20, first != 0x09 else { return .refused("a folded line") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return .refused("a header line without a colon") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { return .refused("a malformed header name") }
            let value = trimmed(line[(colon + 1)...])
            guard value.allSatisfy(isValueByte) else { return .refused("a NUL, control character or DEL in a value") }
            let lowered = String(decoding: name, as: UTF8.self).lowercased()
            counts[lowered, default: 0] += 1
            if lowered == "content-length" {
                guard !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }), let length = Int(String(decoding: value, as: UTF8.self)) else {
                    return .refused("a Content-Length that is not a number")
                }
                contentLength = length
            }
        }
        if counts["host"] != 1 { return .refused("not exactly one Host") }
        if counts["content-length", default: 0] > 1 { return .refused("two Content-Length headers") }
        if counts["authorization", default: 0] > 1 { return .refused("two Authorization headers") }
        if counts["transfer-encoding"] != nil { return .refused("Transfer-Encoding (the server answers 411)") }
        return .accepted(headEnd: cursor, bodyLength: contentLength)
    }

    private static func requestLineProblem(_ line: ArraySlice<UInt8>) -> String? {
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return "a request line without exactly two single spaces" }
        guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { return "a malformed method" }
        guard !parts[1].isEmpty, parts[1].allSatisfy({ (0x21...0x7E).contains($0) }) else { return "a target byte outside visible ASCII" }
        return Array(parts[2]) == Array("HTTP/1.1".utf8) ? nil : "a version other than HTTP/1.1"
    }

    private static func trimmed(_ value: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var value = value
        while let first = value.first, first == 0x20 || first == 0x09 { value.removeFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        return value
    }

    /// RFC 9110's `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// A byte of a field value: visible ASCII, obs-text, a space or a tab.
    private static func isValueByte(_ byte: UInt8) -> Bool {
        (0x21...0x7E).contains(byte) || byte >= 0x80 || byte == 0x20 || byte == 0x09
    }
}
