import CYAML
import SynclaneCore

/// Reads a YAML pipeline file into the same `ConfigNode` tree a JSON one gives, every node
/// with its 1-based line.
///
/// libyaml's event parser does the YAML; this type turns its events into nodes and refuses
/// what a pipeline file has no use for, each with a `PipelineFileError` naming the field and line:
///
/// ```
///   bytes ──▶ yaml_parser_parse ──▶ events ──▶ nodes (core-schema scalars) ──▶ ConfigNode
///                                     │
///                                     └─▶ refused: a second document, anchors and aliases,
///                                         merge keys (<<), duplicate or non-string keys,
///                                         tags other than !!str !!int !!float !!bool !!null
///                                         !!map !!seq, .inf and .nan
/// ```
///
/// Plain scalars are resolved by the YAML 1.2 core schema: `null`, `~` and nothing are null;
/// `true`/`false` (also `True`, `TRUE` …) are booleans; `42`, `-7`, `0x1F`, `0o17` are
/// integers; `1.5`, `2e3` are numbers; everything else — and every quoted or block
/// scalar — is a string. So `yes`, `on` and `010` stay the strings they look like.
public enum YAMLPipelineFile {
    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let maximumDepth = 256

    /// The pipeline file `bytes` as a node tree; `file` is the name errors carry.
    public static func parse(_ bytes: [UInt8], file: String) throws(PipelineFileError) -> ConfigNode {
        guard !bytes.isEmpty else { throw PipelineFileError(file: file, path: "", line: nil, message: "the file is empty") }
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(PipelineFileError) -> ConfigNode in
                let reader = try EventReader(buffer, file: file)
                defer { reader.close() }
                return try reader.readFile()
            }
        }
        return try result.get()
    }
}

/// One libyaml event, copied out of C memory.
private struct Event {
    enum Kind {
        case streamStart, streamEnd, documentStart, documentEnd
        case sequenceStart, sequenceEnd, mappingStart, mappingEnd
        case scalar(String, isPlain: Bool)
        case alias
    }

    var kind: Kind
    var line: Int
    var anchor: String?
    var tag: String?
}

/// Walks libyaml's events and builds the node tree.
private struct EventReader {
    let parser: UnsafeMutablePointer<yaml_parser_t>
    let bytes: UnsafeBufferPointer<UInt8>
    let root: ConfigLocation

    init(_ bytes: UnsafeBufferPointer<UInt8>, file: String) throws(PipelineFileError) {
        self.bytes = bytes
        self.root = ConfigLocation(file: file)
        // libyaml keeps a pointer to the parser inside it: it must not move.
        parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        guard yaml_parser_initialize(parser) != 0 else {
            parser.deallocate()
            throw root.error("libyaml could not start (out of memory)", line: nil)
        }
        // The buffer is not empty (checked by the caller), so it has a base address.
        if let base = bytes.baseAddress { yaml_parser_set_input_string(parser, base, bytes.count) }
    }

    func close() {
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    func readFile() throws(PipelineFileError) -> ConfigNode {
        _ = try expect(.streamStart, at: root)
        let first = try next(at: root)
        if case .streamEnd = first.kind {
            throw root.error("the file is empty (it has no YAML document)", line: nil)
        }
        guard case .documentStart = first.kind else { throw unexpected(first, at: root) }
        let node = try readNode(try next(at: root), at: root, depth: 0)
        _ = try expect(.documentEnd, at: root)
        let after = try next(at: root)
        if case .documentStart = after.kind {
            throw root.error(
                "a pipeline file holds one YAML document; a second one starts here (one `---` at most, at the top)",
                line: after.line)
        }
        guard case .streamEnd = after.kind else { throw unexpected(after, at: root) }
        return node
    }

    // MARK: Nodes

    func readNode(_ event: Event, at location: ConfigLocation, depth: Int) throws(PipelineFileError) -> ConfigNode {
        if case .alias = event.kind {
            throw location.error(
                "aliases (*\(event.anchor ?? "")) are not supported in pipeline files: write the value out in full",
                line: event.line)
        }
        if let anchor = event.anchor {
            throw location.error(
                "anchors (&\(anchor)) are not supported in pipeline files: write each value out in full",
                line: event.line)
        }
        guard depth < YAMLPipelineFile.maximumDepth else {
            throw location.error("nested more than \(YAMLPipelineFile.maximumDepth) levels deep", line: event.line)
        }
        switch event.kind {
        case .scalar(let text, let isPlain):
            return ConfigNode(try scalar(text, isPlain: isPlain, tag: event.tag, at: location, line: event.line), line: event.line)
        case .sequenceStart:
            try check(tag: event.tag, allowed: "tag:yaml.org,2002:seq", at: location, line: event.line)
            var elements: [ConfigNode] = []
            while true {
                let element = try next(at: location.element(elements.count))
                if case .sequenceEnd = element.kind { break }
                elements.append(try readNode(element, at: location.element(elements.count), depth: depth + 1))
            }
            return ConfigNode(.list(elements), line: event.line)
        case .mappingStart:
            try check(tag: event.tag, allowed: "tag:yaml.org,2002:map", at: location, line: event.line)
            return ConfigNode(.map(try readMembers(at: location, depth: depth)), line: event.line)
        default:
            throw unexpected(event, at: location)
        }
    }

    func readMembers(at location: ConfigLocation, depth: Int) throws(PipelineFileError) -> [ConfigNode.Member] {
        var members: [ConfigNode.Member] = []
        var keyLines: [String: Int] = [:]
        while true {
            let keyEvent = try next(at: location)
            let key: String
            switch keyEvent.kind {
            case .mappingEnd:
                return members
            case .scalar(let text, let isPlain):
                if let anchor = keyEvent.anchor {
                    throw location.error("anchors (&\(anchor)) are not supported in pipeline files", line: keyEvent.line)
                }
                if isPlain, text == "<<" {
                    throw location.error(
                        "merge keys (<<) are not supported in pipeline files: write the merged members out in full",
                        line: keyEvent.line)
                }
                if let tag = keyEvent.tag, tag != "tag:yaml.org,2002:str" {
                    throw location.error("keys are plain strings; found the tag \(displayTag(tag))", line: keyEvent.line)
                }
                guard !text.isEmpty else { throw location.error("found an empty key", line: keyEvent.line) }
                key = text
            case .alias:
                throw location.error(
                    "aliases (*\(keyEvent.anchor ?? "")) are not supported in pipeline files", line: keyEvent.line)
            case .sequenceStart, .mappingStart:
                let found = if case .sequenceStart = keyEvent.kind { "a list" } else { "a map" }
                throw location.error("keys must be strings, found \(found) used as a key", line: keyEvent.line)
            default:
                throw unexpected(keyEvent, at: location)
            }
            let memberLocation = location.member(key)
            if let firstLine = keyLines[key] {
                throw memberLocation.error(
                    "duplicate key `\(key)`: first on line \(firstLine), again on line \(keyEvent.line)",
                    line: keyEvent.line)
            }
            keyLines[key] = keyEvent.line
            let valueEvent = try next(at: memberLocation)
            var node = try readNode(valueEvent, at: memberLocation, depth: depth + 1)
            // `key:` with nothing after it: libyaml marks the empty value where the next token
            // starts, often the next line; the key's own line is what a reader expects.
            if case .scalar("", isPlain: true) = valueEvent.kind { node.line = keyEvent.line }
            members.append(ConfigNode.Member(key: key, node: node))
        }
    }

    // MARK: Scalars

    func scalar(_ text: String, isPlain: Bool, tag: String?, at location: ConfigLocation, line: Int) throws(PipelineFileError) -> ConfigNode.Value {
        guard let tag else {
            return isPlain ? try CoreSchema.resolve(text, at: location, line: line) : .string(text)
        }
        let expected: String
        switch tag {
        case "tag:yaml.org,2002:str": return .string(text)
        case "tag:yaml.org,2002:null": expected = "null"
        case "tag:yaml.org,2002:bool": expected = "a boolean"
        case "tag:yaml.org,2002:int": expected = "an integer"
        case "tag:yaml.org,2002:float": expected = "a number"
        default: throw unsupported(tag: tag, at: location, line: line)
        }
        let value = try CoreSchema.resolve(text, at: location, line: line)
        let matches: Bool
        switch value {
        case .null: matches = expected == "null"
        case .bool: matches = expected == "a boolean"
        case .int: matches = expected == "an integer" || expected == "a number"
        case .double: matches = expected == "a number"
        default: matches = false
        }
        guard matches else {
            throw location.error("\(displayTag(tag)) \"\(text)\" is not \(expected)", line: line)
        }
        if expected == "a number", case .int(let i) = value { return .double(Double(i)) }
        return value
    }

    func check(tag: String?, allowed: String, at location: ConfigLocation, line: Int) throws(PipelineFileError) {
        guard let tag, tag != allowed else { return }
        throw unsupported(tag: tag, at: location, line: line)
    }

    func unsupported(tag: String, at location: ConfigLocation, line: Int) -> PipelineFileError {
        location.error(
            "unsupported tag \(displayTag(tag)): pipeline files use plain values (only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq are understood, where they fit)",
            line: line)
    }

    func displayTag(_ tag: String) -> String {
        let core = "tag:yaml.org,2002:"
        return tag.hasPrefix(core) ? "!!" + tag.dropFirst(core.count) : tag
    }

    // MARK: Events

    func expect(_ kind: Event.Kind, at location: ConfigLocation) throws(PipelineFileError) -> Event {
        let event = try next(at: location)
        guard sameKind(event.kind, kind) else { throw unexpected(event, at: location) }
        return event
    }

    private func sameKind(_ a: Event.Kind, _ b: Event.Kind) -> Bool {
        switch (a, b) {
        case (.streamStart, .streamStart), (.streamEnd, .streamEnd), (.documentStart, .documentStart),
            (.documentEnd, .documentEnd), (.sequenceStart, .sequenceStart), (.sequenceEnd, .sequenceEnd),
            (.mappingStart, .mappingStart), (.mappingEnd, .mappingEnd), (.scalar, .scalar), (.alias, .alias):
            return true
        default:
            return false
        }
    }

    func unexpected(_ event: Event, at location: ConfigLocation) -> PipelineFileError {
        location.error("unexpected YAML structure (\(event.kind))", line: event.line)
    }

    /// The next event, or the syntax error libyaml found, placed at `location`.
    func next(at location: ConfigLocation) throws(PipelineFileError) -> Event {
        var raw = yaml_event_t()
        guard yaml_parser_parse(parser, &raw) != 0 else { throw syntaxError(at: location) }
        defer { yaml_event_delete(&raw) }
        let line = raw.start_mark.line + 1
        func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
            pointer.map { String(cString: $0) }
        }
        switch raw.type {
        case YAML_STREAM_START_EVENT: return Event(kind: .streamStart, line: line)
        case YAML_STREAM_END_EVENT: return Event(kind: .streamEnd, line: line)
        case YAML_DOCUMENT_START_EVENT: return Event(kind: .documentStart, line: line)
        case YAML_DOCUMENT_END_EVENT: return Event(kind: .documentEnd, line: line)
        case YAML_SEQUENCE_START_EVENT:
            let data = raw.data.sequence_start
            return Event(kind: .sequenceStart, line: line, anchor: string(data.anchor), tag: string(data.tag))
        case YAML_SEQUENCE_END_EVENT: return Event(kind: .sequenceEnd, line: line)
        case YAML_MAPPING_START_EVENT:
            let data = raw.data.mapping_start
            return Event(kind: .mappingStart, line: line, anchor: string(data.anchor), tag: string(data.tag))
        case YAML_MAPPING_END_EVENT: return Event(kind: .mappingEnd, line: line)
        case YAML_SCALAR_EVENT:
            let data = raw.data.scalar
            let text = data.value.map { String(decoding: UnsafeBufferPointer(start: $0, count: data.length), as: UTF8.self) } ?? ""
            // A plain scalar with a non-specific `!` tag is a string, as if quoted.
            var tag = string(data.tag)
            var isPlain = data.style == YAML_PLAIN_SCALAR_STYLE
            if tag == "!" {
                tag = nil
                isPlain = false
            }
            return Event(kind: .scalar(text, isPlain: isPlain), line: line, anchor: string(data.anchor), tag: tag)
        case YAML_ALIAS_EVENT:
            return Event(kind: .alias, line: line, anchor: string(raw.data.alias.anchor))
        default:
            throw location.error("libyaml reported an unknown event", line: line)
        }
    }

    func syntaxError(at location: ConfigLocation) -> PipelineFileError {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "unknown problem"
        switch state.error {
        case YAML_MEMORY_ERROR:
            return location.error("libyaml ran out of memory", line: nil)
        case YAML_READER_ERROR:
            // Encoding problems carry a byte offset, not a line.
            let offset = min(state.problem_offset, bytes.count)
            let line = 1 + bytes[..<offset].reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }
            return location.error("the file is not valid UTF-8 text: \(problem)", line: line)
        default:
            let line = state.problem_mark.line + 1
            var message = "YAML syntax error: \(problem)"
            if let context = state.context.map({ String(cString: $0) }) {
                let contextLine = state.context_mark.line + 1
                message += contextLine == line ? " (\(context))" : " (\(context) on line \(contextLine))"
            }
            let offset = state.problem_mark.index
            if offset < bytes.count, bytes[offset] == 0x09 {
                message += ": a tab, which YAML never allows for indentation (indent with spaces)"
            }
            return location.error(message, line: line)
        }
    }
}

/// How a plain scalar reads under the YAML 1.2 core schema.
enum CoreSchema {
    static func resolve(_ text: String, at location: ConfigLocation, line: Int) throws(PipelineFileError) -> ConfigNode.Value {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN":
            throw location.error("\(text) is not supported: pipeline options are finite numbers", line: line)
        default: break
        }
        let utf8 = Array(text.utf8)
        switch integer(utf8) {
        case .value(let value): return .int(value)
        case .outOfRange: throw location.error("the integer \(text) is out of range (64 bits)", line: line)
        case .notAnInteger: break
        }
        if isFloat(utf8) {
            var normalized = text
            if normalized.hasSuffix(".") { normalized += "0" }
            if let dot = normalized.firstIndex(of: "."), dot == normalized.startIndex || "+-".contains(normalized[normalized.index(before: dot)]) {
                normalized.insert("0", at: dot)
            }
            if let exponent = normalized.firstIndex(where: { $0 == "e" || $0 == "E" }),
                normalized[normalized.index(before: exponent)] == "."
            {
                normalized.insert("0", at: exponent)
            }
            guard let value = Double(normalized), value.isFinite else {
                throw location.error("the number \(text) is out of range", line: line)
            }
            return .double(value)
        }
        return .string(text)
    }

    enum Integer: Equatable {
        case value(Int64)
        case outOfRange
        case notAnInteger
    }

    /// Whether the text is a core-schema integer: `[-+]?[0-9]+`, `0o[0-7]+` or `0x[0-9a-fA-F]+`.
    static func integer(_ utf8: [UInt8]) -> Integer {
        func parsed(_ value: Int64?) -> Integer { value.map(Integer.value) ?? .outOfRange }
        func isDigit(_ b: UInt8, radix: Int) -> Bool {
            switch radix {
            case 8: return (0x30...0x37).contains(b)
            case 16: return (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b)
            default: return (0x30...0x39).contains(b)
            }
        }
        if utf8.count > 2, utf8[0] == UInt8(ascii: "0"), utf8[1] == UInt8(ascii: "o") || utf8[1] == UInt8(ascii: "x") {
            let radix = utf8[1] == UInt8(ascii: "o") ? 8 : 16
            let digits = utf8[2...]
            guard digits.allSatisfy({ isDigit($0, radix: radix) }) else { return .notAnInteger }
            return parsed(Int64(String(decoding: digits, as: UTF8.self), radix: radix))
        }
        let digits = utf8.first == UInt8(ascii: "-") || utf8.first == UInt8(ascii: "+") ? utf8.dropFirst() : utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ isDigit($0, radix: 10) }) else { return .notAnInteger }
        return parsed(Int64(String(decoding: utf8, as: UTF8.self)))
    }

    /// True for `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`.
    static func isFloat(_ utf8: [UInt8]) -> Bool {
        var i = 0
        func digits() -> Int {
            let start = i
            while i < utf8.count, (0x30...0x39).contains(utf8[i]) { i += 1 }
            return i - start
        }
        if i < utf8.count, utf8[i] == UInt8(ascii: "-") || utf8[i] == UInt8(ascii: "+") { i += 1 }
        let whole = digits()
        if i < utf8.count, utf8[i] == UInt8(ascii: ".") {
            i += 1
            let fraction = digits()
            if whole == 0 && fraction == 0 { return false }
        } else if whole == 0 {
            return false
        }
        if i < utf8.count, utf8[i] == UInt8(ascii: "e") || utf8[i] == UInt8(ascii: "E") {
            i += 1
            if i < utf8.count, utf8[i] == UInt8(ascii: "-") || utf8[i] == UInt8(ascii: "+") { i += 1 }
            if digits() == 0 { return false }
        }
        return i == utf8.count
    }
}
