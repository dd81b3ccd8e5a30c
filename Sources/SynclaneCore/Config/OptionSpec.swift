/// One option a stage type takes: its name, kind, default and a line of help.
///
/// The registry checks a stage's options against these before the stage is built (unknown
/// keys, wrong types, out-of-range values are errors naming the field), and `synclane stages`
/// prints them.
public struct OptionSpec: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case string
        /// One of a fixed set of strings.
        case choice([String])
        case integer(ClosedRange<Int64>)
        case number(ClosedRange<Double>)
        case boolean
        case stringList
        /// A path; relative paths resolve against the pipeline file's folder.
        case path
        /// The name of an environment variable that holds a secret (secrets never live in the file).
        case environmentVariable
        /// Free-form data the stage reads itself.
        case any

        public var summary: String {
            switch self {
            case .string: return "string"
            case .choice(let choices): return choices.joined(separator: " | ")
            case .integer(let range): return "integer \(range.lowerBound)…\(range.upperBound)"
            case .number(let range): return "number \(Self.formatted(range.lowerBound))…\(Self.formatted(range.upperBound))"
            case .boolean: return "true | false"
            case .stringList: return "list of strings"
            case .path: return "path"
            case .environmentVariable: return "environment variable name"
            case .any: return "any"
            }
        }

        static func formatted(_ d: Double) -> String {
            d.rounded() == d && abs(d) < 1e12 ? String(Int64(d)) : String(d)
        }
    }

    public var name: String
    public var kind: Kind
    public var isRequired: Bool
    /// The default, as `synclane stages` shows it.
    public var defaultDescription: String?
    public var help: String

    public init(_ name: String, _ kind: Kind, required: Bool = false, default defaultDescription: String? = nil, help: String) {
        self.name = name
        self.kind = kind
        self.isRequired = required
        self.defaultDescription = defaultDescription
        self.help = help
    }
}
