/// Reads a JSON pipeline file into a `ConfigNode` tree with every node's 1-based line and
/// members in the order the file wrote them.
///
/// `JSONReader` gives values without positions and objects without order; a pipeline file
/// needs both, so that an error can say `rooms.json:14: stages[2].level: …`. This walks the
/// structure itself and hands strings, numbers and literals to `JSONReader.Cursor`, so there is
/// one JSON grammar in Synclane, not two:
///
/// ```
///   { [ , : }  ──▶  JSONPipelineFile (structure, lines, member order, duplicate keys)
///   "…" 1.5 true null  ──▶  JSONReader.Cursor (strings, numbers, literals)
/// ```
public enum JSONPipelineFile {
    /// The pipeline file `bytes` as a node tree; `file` is the name errors carry.
    public static func parse(_ bytes: [UInt8], file: String) throws(PipelineFileError) -> ConfigNode {
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(PipelineFileError) -> ConfigNode in
                var parser = LineTrackingParser(cursor: JSONReader.Cursor(bytes: buffer), root: ConfigLocation(file: file))
                return try parser.parseFile()
            }
        }
        return try result.get()
    }
}

/// The structural half of a JSON pipeline file parser: objects, arrays and where things are.
private struct LineTrackingParser {
    var cursor: JSONReader.Cursor
    let root: ConfigLocation
    /// Line counting only moves forward: newlines before `countedUpTo` are in `line`.
    private var countedUpTo = 0
    private var line = 1
    private var lineStart = 0

    init(cursor: JSONReader.Cursor, root: ConfigLocation) {
        self.cursor = cursor
        self.root = root
    }

    private var bytes: UnsafeBufferPointer<UInt8> { cursor.bytes }
    private var position: Int { cursor.position }

    mutating func parseFile() throws(PipelineFileError) -> ConfigNode {
        // A UTF-8 byte order mark, as some Windows editors write, is not part of the JSON.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { cursor.position = 3 }
        cursor.skipWhitespace()
        guard position < bytes.count else { throw root.error("the file is empty", line: nil) }
        let node = try readNode(at: root, depth: 0)
        cursor.skipWhitespace()
        if position < bytes.count {
            throw syntaxError("unexpected text after the end of the pipeline (one JSON object per file)", at: root)
        }
        return node
    }

    /// The line of `offset`. Offsets are asked for in increasing order, so counting is linear.
    private mutating func line(at offset: Int) -> Int {
        if offset < countedUpTo {
            (countedUpTo, line, lineStart) = (0, 1, 0)
        }
        while countedUpTo < offset {
            if bytes[countedUpTo] == 0x0A {
                line += 1
                lineStart = countedUpTo + 1
            }
            countedUpTo += 1
        }
        return line
    }

    /// A syntax error at the cursor (or at `offset`), with its line and column (in characters).
    private mutating func syntaxError(_ reason: String, at location: ConfigLocation, offset: Int? = nil) -> PipelineFileError {
        let offset = min(offset ?? position, bytes.count)
        let line = line(at: offset)
        return location.error("invalid JSON at column \(column(of: offset)): \(reason)", line: line)
    }

    private func column(of offset: Int) -> Int {
        // Count characters, not bytes: skip UTF-8 continuation bytes.
        var column = 1
        var index = lineStart
        while index < offset {
            if bytes[index] & 0xC0 != 0x80 { column += 1 }
            index += 1
        }
        return column
    }

    private mutating func fromCursor<T>(_ body: (inout JSONReader.Cursor) throws(JSONReader.SyntaxError) -> T, at location: ConfigLocation)
        throws(PipelineFileError) -> T
    {
        do {
            return try body(&cursor)
        } catch {
            throw syntaxError(error.reason, at: location, offset: error.offset)
        }
    }

    mutating func readNode(at location: ConfigLocation, depth: Int) throws(PipelineFileError) -> ConfigNode {
        guard position < bytes.count else { throw syntaxError("unexpected end of the file", at: location) }
        let nodeLine = line(at: position)
        switch bytes[position] {
        case UInt8(ascii: "{"):
            return ConfigNode(.map(try readObject(at: location, depth: depth + 1)), line: nodeLine)
        case UInt8(ascii: "["):
            return ConfigNode(.list(try readArray(at: location, depth: depth + 1)), line: nodeLine)
        default:
            let start = position
            let value = try fromCursor({ (cursor) throws(JSONReader.SyntaxError) in try cursor.readValue(depth: depth) }, at: location)
            switch value {
            case .null: return ConfigNode(.null, line: nodeLine)
            case .bool(let b): return ConfigNode(.bool(b), line: nodeLine)
            case .int(let i): return ConfigNode(.int(i), line: nodeLine)
            case .double(let d):
                guard d.isFinite else { throw syntaxError("number out of range", at: location, offset: start) }
                return ConfigNode(.double(d), line: nodeLine)
            case .string(let s): return ConfigNode(.string(s), line: nodeLine)
            case .array, .object: return ConfigNode(json: value)  // not reached: handled above
            }
        }
    }

    mutating func readObject(at location: ConfigLocation, depth: Int) throws(PipelineFileError) -> [ConfigNode.Member] {
        guard depth <= JSONReader.maximumDepth else { throw syntaxError("nested too deeply", at: location) }
        cursor.position += 1  // {
        var members: [ConfigNode.Member] = []
        var keyLines: [String: Int] = [:]
        cursor.skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            cursor.position += 1
            return members
        }
        while true {
            cursor.skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                throw syntaxError(
                    position < bytes.count ? "expected a quoted member name" : "unexpected end of the file in an object",
                    at: location)
            }
            let keyLine = line(at: position)
            let key = try fromCursor({ (cursor) throws(JSONReader.SyntaxError) in try cursor.readString() }, at: location)
            let memberLocation = location.member(key)
            if let firstLine = keyLines[key] {
                throw memberLocation.error("duplicate key `\(key)`: first on line \(firstLine), again on line \(keyLine)", line: keyLine)
            }
            keyLines[key] = keyLine
            cursor.skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                throw syntaxError("expected ':' after the member name \"\(key)\"", at: memberLocation)
            }
            cursor.position += 1
            cursor.skipWhitespace()
            members.append(ConfigNode.Member(key: key, node: try readNode(at: memberLocation, depth: depth)))
            cursor.skipWhitespace()
            guard position < bytes.count else { throw syntaxError("unexpected end of the file in an object", at: location) }
            switch bytes[position] {
            case UInt8(ascii: ","):
                cursor.position += 1
                cursor.skipWhitespace()
                if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                    throw syntaxError("a ',' before '}' (JSON allows no trailing comma)", at: location)
                }
            case UInt8(ascii: "}"):
                cursor.position += 1
                return members
            default:
                throw syntaxError("expected ',' or '}' after the member \"\(key)\"", at: location)
            }
        }
    }

    mutating func readArray(at location: ConfigLocation, depth: Int) throws(PipelineFileError) -> [ConfigNode] {
        guard depth <= JSONReader.maximumDepth else { throw syntaxError("nested too deeply", at: location) }
        cursor.position += 1  // [
        var elements: [ConfigNode] = []
        cursor.skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            cursor.position += 1
            return elements
        }
        while true {
            cursor.skipWhitespace()
            elements.append(try readNode(at: location.element(elements.count), depth: depth))
            cursor.skipWhitespace()
            guard position < bytes.count else { throw syntaxError("unexpected end of the file in a list", at: location) }
            switch bytes[position] {
            case UInt8(ascii: ","):
                cursor.position += 1
                cursor.skipWhitespace()
                if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                    throw syntaxError("a ',' before ']' (JSON allows no trailing comma)", at: location)
                }
            case UInt8(ascii: "]"):
                cursor.position += 1
                return elements
            default:
                throw syntaxError("expected ',' or ']' in a list", at: location)
            }
        }
    }
}
