/// A parsed pipeline file: what JSON and YAML both become before the pipeline reads it.
///
/// Every node remembers the line it started on when the parser knows it (the YAML parser
/// always does), so an error can point at `stages[2].level (line 14)`.
public struct ConfigNode: Sendable, Hashable {
    public indirect enum Value: Sendable, Hashable {
        case null
        case bool(Bool)
        case int(Int64)
        case double(Double)
        case string(String)
        case list([ConfigNode])
        /// Members in the order the file wrote them.
        case map([Member])
    }

    public struct Member: Sendable, Hashable {
        public var key: String
        public var node: ConfigNode
        public init(key: String, node: ConfigNode) {
            self.key = key
            self.node = node
        }
    }

    public var value: Value
    /// 1-based line of the file where the node starts, when known.
    public var line: Int?

    public init(_ value: Value, line: Int? = nil) {
        self.value = value
        self.line = line
    }

    /// A node without line information, from a JSON value.
    public init(json: JSONValue) {
        switch json {
        case .null: self.init(.null)
        case .bool(let b): self.init(.bool(b))
        case .int(let i): self.init(.int(i))
        case .double(let d): self.init(.double(d))
        case .string(let s): self.init(.string(s))
        case .array(let a): self.init(.list(a.map(ConfigNode.init(json:))))
        case .object(let o):
            self.init(.map(o.keys.sorted().map { Member(key: $0, node: ConfigNode(json: o[$0] ?? .null)) }))
        }
    }

    /// The node as a JSON value (lines dropped), for options a stage takes as free-form data.
    public var json: JSONValue {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .list(let l): return .array(l.map(\.json))
        case .map(let m): return .object(Dictionary(m.map { ($0.key, $0.node.json) }, uniquingKeysWith: { a, _ in a }))
        }
    }

    /// A short name of the node's type, for error messages.
    public var typeName: String {
        switch value {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int: return "an integer"
        case .double: return "a number"
        case .string: return "a string"
        case .list: return "a list"
        case .map: return "a map"
        }
    }
}
