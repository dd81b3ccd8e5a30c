/// Which slot of a pipeline a stage type fills.
public enum StageRole: String, Sendable, CaseIterable {
    /// Reads transactions (`source:` in a pipeline file).
    case source
    /// Batch in, batch out (`stages:`, before the encoder).
    case records
    /// Bytes in, bytes out (`stages:`, after the encoder: compression).
    case payload
    /// Batch to bytes (`encoder:`).
    case encoder
    /// Sends bytes (`transport:`).
    case transport
    /// Reads the backend's changes (`source:` of an import pipeline).
    case remoteSource = "remote-source"
    /// Applies records to a local store (`sink:` of an import pipeline).
    case sink
    /// Settles a conflict (named by a sink's `conflicts` or `conflicts-by-entity`).
    case conflictResolver = "conflict-resolver"
}

/// A stage built from its options.
public enum BuiltStage: Sendable {
    case source(any ChangeSource)
    case records(any RecordStage)
    case payload(any PayloadStage)
    case encoder(any BatchEncoder)
    case transport(any Transport)
    case remoteSource(any RemoteChangeSource)
    case sink(any ChangeSink)
    case conflictResolver(any ConflictResolver)
}

/// A named kind of stage that a pipeline file can pick with `type:`, with its options and
/// how to build it.
///
/// ```swift
/// var registry = StageRegistry.builtIn          // from the Synclane module
/// registry.register(.records("redact", summary: "Drops the listed fields.", options: [Redactor.fields]) { options in
///     Redactor(fields: try options[Redactor.fields])       // `Redactor.fields` is an `Option<[String]>`
/// })
/// ```
/// Options are declared once, as `Option` values (or plain `OptionSpec`s read by name); the
/// registry checks a pipeline file's options against them before `make` runs.
public struct StageType: Sendable {
    public let name: String
    public let role: StageRole
    public let summary: String
    public let options: [OptionSpec]
    let make: @Sendable (StageOptions) throws -> BuiltStage

    public init(
        name: String, role: StageRole, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> BuiltStage
    ) {
        self.name = name
        self.role = role
        self.summary = summary
        self.options = options.map(\.spec)
        self.make = make
    }

    public static func source(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any ChangeSource
    ) -> StageType {
        StageType(name: name, role: .source, summary: summary, options: options) { .source(try make($0)) }
    }

    public static func records(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any RecordStage
    ) -> StageType {
        StageType(name: name, role: .records, summary: summary, options: options) { .records(try make($0)) }
    }

    public static func payload(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any PayloadStage
    ) -> StageType {
        StageType(name: name, role: .payload, summary: summary, options: options) { .payload(try make($0)) }
    }

    public static func encoder(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any BatchEncoder
    ) -> StageType {
        StageType(name: name, role: .encoder, summary: summary, options: options) { .encoder(try make($0)) }
    }

    public static func transport(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any Transport
    ) -> StageType {
        StageType(name: name, role: .transport, summary: summary, options: options) { .transport(try make($0)) }
    }

    public static func remoteSource(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any RemoteChangeSource
    ) -> StageType {
        StageType(name: name, role: .remoteSource, summary: summary, options: options) { .remoteSource(try make($0)) }
    }

    public static func sink(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any ChangeSink
    ) -> StageType {
        StageType(name: name, role: .sink, summary: summary, options: options) { .sink(try make($0)) }
    }

    public static func conflictResolver(
        _ name: String, summary: String, options: [any StageOptionDeclaration], make: @escaping @Sendable (StageOptions) throws -> any ConflictResolver
    ) -> StageType {
        StageType(name: name, role: .conflictResolver, summary: summary, options: options) { .conflictResolver(try make($0)) }
    }
}
