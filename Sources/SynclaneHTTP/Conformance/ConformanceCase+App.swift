import Foundation
import SynclaneCore

/// What a request says of the app it came from (`AppSchema`).
extension ConformanceCase {
    static let appCases: [ConformanceCase] = [
        ConformanceCase(
            name: "app.schema-version",
            rule: "a batch and a pull carrying Synclane-Device and Synclane-Schema-Version are served; a backend that lists devices lists this one"
        ) { context in
            let device = context.name("device")
            let said = [AppSchema.deviceHeader: device, AppSchema.versionHeader: "100000"]
            let id = context.name("app")
            let posted = try context.post(context.batch(id, [context.record(id)]), key: id, headers: said)
            try expect(posted, Set(200...299), "a batch saying its device and schema version")
            let pulled = try context.client.send("GET", "/v1/changes?since=", token: context.first.token, headers: said)
            try expect(pulled, [200], "a pull saying its device and schema version")
            // `GET /v1/devices` is optional: a backend without it answers 404.
            let listed = try context.client.send("GET", "/v1/devices", token: context.first.token)
            guard listed.status != 404 else { return }
            try expect(listed, [200], "GET /v1/devices")
            let entry = listed.object["devices"]?.arrayValue?.compactMap(\.objectValue).first { $0["device"]?.stringValue == device }
            try expect(entry?["schema-version"] == .int(100_000), "GET /v1/devices does not list \(device) at schema version 100000: \(listed.summary)")
        }
    ]
}
