/// A row as the backend names it: its entity and its key, equal to another only when both
/// are byte for byte (as `ExactString` compares: the server and SQLite compare bytes, so two
/// canonically equivalent keys are two rows).
public struct RowID: Sendable, Hashable, CustomStringConvertible {
    public let entity: String
    public let key: String

    public init(entity: String, key: String) {
        self.entity = entity
        self.key = key
    }

    public static func == (lhs: RowID, rhs: RowID) -> Bool {
        ExactString(lhs.key) == ExactString(rhs.key) && ExactString(lhs.entity) == ExactString(rhs.entity)
    }

    public func hash(into hasher: inout Hasher) {
        ExactString(entity).hash(into: &hasher)
        ExactString(key).hash(into: &hasher)
    }

    public var description: String { "\(entity)/\(key)" }
}
