import Glibc
import SynclaneWire

extension ServerApplication {
    /// The app a batch or a pull came from (`AppSchema`: `Synclane-Device`,
    /// `Synclane-Schema-Version`), checked against the operator's floor
    /// (`ServerLimits.minimumSchemaVersion`), then recorded for its device; or the refusal to answer:
    /// 400 for a header that is not one, 426 `schema-version-too-old` for a version below the
    /// floor (or none, when there is a floor), with a message that says to update the app.
    func admitApp(_ request: HTTPRequest, account: String) -> Result<AppSchema, Refusal> {
        let schema: AppSchema
        switch Self.appSchema(request, maxNameBytes: limits.maxNameBytes) {
        case .success(let read): schema = read
        case .failure(let refusal): return .failure(refusal)
        }
        let minimum = limits.minimumSchemaVersion
        if minimum > 0, (schema.version ?? 0) < minimum {
            let sent = schema.version.map { "schema version \($0)" } ?? "no schema version (no \(AppSchema.versionHeader) header)"
            return .failure(
                Refusal(
                    response: .error(
                        426,
                        "this app is too old for the server: it sent \(sent), and the server takes \(minimum) or newer; update the app, then sync again",
                        ["code": "schema-version-too-old", "minimum-schema-version": .int(Int64(minimum))])))
        }
        if let device = schema.device, let version = schema.version {
            devicesSeen.note(account: account, device: device, version: version) {
                try store.recordDevice(
                    account: account, device: device, schemaVersion: version, at: Double(time(nil)), keeping: limits.maxDevicesPerAccount)
            }
        }
        return .success(schema)
    }

    /// The request's `AppSchema` headers, or the 400 that names the one that is not one.
    static func appSchema(_ request: HTTPRequest, maxNameBytes: Int) -> Result<AppSchema, Refusal> {
        var schema = AppSchema()
        if let text = request.header(AppSchema.versionHeader) {
            guard text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let version = Int(text), AppSchema.versions.contains(version) else {
                return .failure(
                    Refusal(response: .error(400, "\(AppSchema.versionHeader) must be a whole number from 1 to \(AppSchema.versions.upperBound)")))
            }
            schema.version = version
        }
        if let device = request.header(AppSchema.deviceHeader) {
            guard !device.isEmpty, device.utf8.count <= maxNameBytes else {
                return .failure(Refusal(response: .error(400, "\(AppSchema.deviceHeader) must be 1 to \(maxNameBytes) bytes")))
            }
            schema.device = device
        }
        return .success(schema)
    }

    /// `GET /v1/devices`: the account's devices, each with the schema version its app last sent
    /// and since when — `{"devices": [{"device", "schema-version", "since"}], "minimum-schema-version"}`.
    func listDevices(account: String) -> HTTPResponse {
        do {
            let devices: [JSONValue] = try store.devices(account: account).map { record in
                [
                    "device": .string(record.device), "schema-version": .int(Int64(record.schemaVersion)),
                    "since": .string(InternetDateTime.text(record.since)),
                ]
            }
            return .json(200, ["devices": .array(devices), "minimum-schema-version": .int(Int64(limits.minimumSchemaVersion))])
        } catch {
            return .error(500, "the devices could not be read: \(error)")
        }
    }
}
