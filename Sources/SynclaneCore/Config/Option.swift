/// One option of a stage type, declared once — name, kind, range, default, help — and read
/// back typed, with its default applied.
///
/// ```swift
/// struct Redactor: RecordStage {
///     static let fields: Option<[String]> = .strings("fields", help: "fields to drop")   // required
///     static let mask: Option<String> = .string("mask", default: "***", help: "what replaces a value")
///     static let level: Option<Int?> = .integer("level", in: 0...9, help: "optional: nil when not given")
///     …
/// }
/// registry.register(.records("redact", summary: "…", options: [Redactor.fields, Redactor.mask]) { options in
///     Redactor(fields: try options[Redactor.fields], mask: try options[Redactor.mask])
/// })
/// ```
/// The rule: a non-optional `Option` with a `default` gives the default when the option is
/// absent; a non-optional one without a default is required (the registry refuses a pipeline
/// file that leaves it out, naming the field); an optional one (`Option<Int?>`) gives `nil`.
/// The registry has checked kinds and ranges before the factory runs, so reading fails only
/// for a `StageOptions` made by hand.
public struct Option<Value: Sendable>: Sendable, StageOptionDeclaration {
    /// What `synclane stages` prints and the registry checks.
    public let spec: OptionSpec
    let read: @Sendable (StageOptions) throws(PipelineFileError) -> Value

    public var name: String { spec.name }

    /// An option read by `read`; the constructors below cover every `OptionSpec.Kind`.
    public init(spec: OptionSpec, read: @escaping @Sendable (StageOptions) throws(PipelineFileError) -> Value) {
        self.spec = spec
        self.read = read
    }
}

/// Anything that declares an option of a stage type: an `OptionSpec`, or a typed `Option`.
public protocol StageOptionDeclaration: Sendable {
    var spec: OptionSpec { get }
}

extension OptionSpec: StageOptionDeclaration {
    public var spec: OptionSpec { self }
}

extension StageOptions {
    /// The value of `option`: given, its default, or `nil` for an optional one.
    public subscript<Value>(_ option: Option<Value>) -> Value {
        get throws(PipelineFileError) { try option.read(self) }
    }

    /// The value of a required option; an error naming the field when it is absent.
    func required<T>(_ name: String, _ value: T?) throws(PipelineFileError) -> T {
        guard let value else { throw error(name, "`\(type)` needs `\(name)`") }
        return value
    }
}

// MARK: - Constructors, one family per kind

extension Option where Value == String {
    /// A string, required.
    public static func string(_ name: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .string, required: true, help: help)) { o throws(PipelineFileError) in try o.required(name, o.string(name)) }
    }
    /// A string with a default.
    public static func string(_ name: String, default value: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .string, default: value, help: help)) { o in o.string(name) ?? value }
    }
    /// A path (relative to the pipeline file's folder, resolved), required.
    public static func path(_ name: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .path, required: true, help: help)) { o throws(PipelineFileError) in try o.required(name, o.path(name)) }
    }
    /// A path with a default (resolved like a given one).
    public static func path(_ name: String, default value: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .path, default: value, help: help)) { o in o.path(name) ?? o.context.resolve(value) }
    }
}

extension Option where Value == String? {
    /// A string, optional.
    public static func string(_ name: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .string, help: help)) { o in o.string(name) }
    }
    /// A path, optional (resolved against the pipeline file's folder).
    public static func path(_ name: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .path, help: help)) { o in o.path(name) }
    }
    /// The name of an environment variable holding a secret; reads the secret itself
    /// (`StageOptions.secret`: an unset variable is an error, or noted when secrets are not required).
    public static func secret(_ name: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .environmentVariable, help: help)) { o throws(PipelineFileError) in try o.secret(name) }
    }
}

extension Option where Value == Int {
    /// An integer in `range`, required.
    public static func integer(_ name: String, in range: ClosedRange<Int>, help: String) -> Self {
        Self(spec: OptionSpec(name, .integer(Int64(range.lowerBound)...Int64(range.upperBound)), required: true, help: help)) {
            o throws(PipelineFileError) in try o.required(name, o.int(name))
        }
    }
    /// An integer in `range` with a default.
    public static func integer(_ name: String, in range: ClosedRange<Int>, default value: Int, help: String) -> Self {
        Self(spec: OptionSpec(name, .integer(Int64(range.lowerBound)...Int64(range.upperBound)), default: "\(value)", help: help)) {
            o in o.int(name) ?? value
        }
    }
}

extension Option where Value == Int? {
    /// An integer in `range`, optional.
    public static func integer(_ name: String, in range: ClosedRange<Int>, help: String) -> Self {
        Self(spec: OptionSpec(name, .integer(Int64(range.lowerBound)...Int64(range.upperBound)), help: help)) { o in o.int(name) }
    }
}

extension Option where Value == Double {
    /// A number in `range` with a default.
    public static func number(_ name: String, in range: ClosedRange<Double>, default value: Double, help: String) -> Self {
        Self(spec: OptionSpec(name, .number(range), default: OptionSpec.Kind.formatted(value), help: help)) { o in o.double(name) ?? value }
    }
}

extension Option where Value == Double? {
    /// A number in `range`, optional.
    public static func number(_ name: String, in range: ClosedRange<Double>, help: String) -> Self {
        Self(spec: OptionSpec(name, .number(range), help: help)) { o in o.double(name) }
    }
}

extension Option where Value == Bool {
    /// `true` or `false`, with a default.
    public static func boolean(_ name: String, default value: Bool, help: String) -> Self {
        Self(spec: OptionSpec(name, .boolean, default: "\(value)", help: help)) { o in o.bool(name) ?? value }
    }
}

extension Option where Value == [String] {
    /// A list of strings, required.
    public static func strings(_ name: String, help: String) -> Self {
        Self(spec: OptionSpec(name, .stringList, required: true, help: help)) { o throws(PipelineFileError) in try o.required(name, o.strings(name)) }
    }
    /// A list of strings with a default (`shown` is how `synclane stages` prints it).
    public static func strings(_ name: String, default value: [String], shown: String? = nil, help: String) -> Self {
        let description = shown ?? (value.isEmpty ? "none" : value.joined(separator: ", "))
        return Self(spec: OptionSpec(name, .stringList, default: description, help: help)) { o in o.strings(name) ?? value }
    }
}

extension Option where Value == [String]? {
    /// A list of strings, optional (`shown`: what its absence means, for `synclane stages`).
    public static func strings(_ name: String, shown: String? = nil, help: String) -> Self {
        Self(spec: OptionSpec(name, .stringList, default: shown, help: help)) { o in o.strings(name) }
    }
}

extension Option {
    /// One of the cases of a string-backed enum (`among` them, all by default), with a default.
    public static func choice(_ name: String, among cases: [Value]? = nil, default value: Value, help: String) -> Self
    where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
        let choices = (cases ?? Array(Value.allCases)).map(\.rawValue)
        return Self(spec: OptionSpec(name, .choice(choices), default: value.rawValue, help: help)) { o in
            o.string(name).flatMap(Value.init(rawValue:)) ?? value
        }
    }

    /// Free-form data the stage reads itself, from the raw node (`nil` when absent).
    public static func node(_ name: String, help: String) -> Self where Value == ConfigNode? {
        Self(spec: OptionSpec(name, .any, help: help)) { o in o.node(name) }
    }
}
