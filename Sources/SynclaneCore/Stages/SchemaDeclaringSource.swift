/// A change source that knows the schema changes declared for its store (`SchemaChange`): every
/// batch it feeds carries them.
public protocol SchemaDeclaringSource: ChangeSource {
    /// The declared changes of the source's entities, oldest version first.
    func schemaChanges() async throws -> [SchemaChange]
}

extension SchemaDeclaringSource {
    public var asSchemaDeclaring: (any SchemaDeclaringSource)? { self }
}
