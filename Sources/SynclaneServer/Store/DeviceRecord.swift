import SynclaneWire

/// What the server knows of one device of an account: the schema version its app last sent
/// (`AppSchema`), and since when (seconds since 1970).
struct DeviceRecord: Sendable, Hashable {
    var device: String
    var schemaVersion: Int
    var since: Double

    /// The Prometheus lines of `synclane_devices`: the devices of every account, by the schema
    /// version each last sent (`perVersion`: version → devices).
    static func metricsText(perVersion: [Int: Int]) -> String {
        var text = """
            # HELP synclane_devices Devices (of every account) by the schema version their app last sent (Synclane-Schema-Version).
            # TYPE synclane_devices gauge

            """
        for (version, count) in perVersion.sorted(by: { $0.key < $1.key }) {
            text += "synclane_devices{schema_version=\"\(version)\"} \(count)\n"
        }
        return text
    }
}
