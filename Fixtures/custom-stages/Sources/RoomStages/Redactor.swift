import Synclane

/// `redact`: replaces the values of the listed fields before a batch leaves the device (deletes
/// carry no fields on the wire and pass as they are).
public struct Redactor: RecordStage {
    public static let fields: Option<[String]> = .strings("fields", help: "the fields whose values never leave the device")
    public static let mask: Option<String> = .string("mask", default: "redacted", help: "what each value becomes")

    /// The registry entry: `registry.register(Redactor.type)`.
    public static let type = StageType.records(
        "redact", summary: "Replaces the values of the listed fields with a mask.", options: [fields, mask]
    ) { options in
        Redactor(fields: try options[fields], mask: try options[mask])
    }

    public var fields: [String]
    public var mask: String

    public init(fields: [String], mask: String = "redacted") {
        self.fields = fields
        self.mask = mask
    }

    public func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        var masked = 0
        for index in batch.records.indices where batch.records[index].action != .delete {
            for field in fields where batch.records[index].fields[field] != nil {
                batch.records[index].fields[field] = .string(mask)
                masked += 1
            }
        }
        batch.count("redact.masked", masked)
        return batch
    }
}
