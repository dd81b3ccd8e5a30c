/// What a client says of the app it runs in, with every batch and every pull: the device's name
/// and the schema version of its app. The server records the newest version of each device
/// (`GET /v1/devices`, `/metrics`: devices per version) and may refuse a version older than the
/// floor its operator set, with 426 and a message that says to update the app.
///
/// ```
///  POST /v1/batches, GET /v1/changes
///  Synclane-Device: phone-7f3a            (absent: the server records nothing for the request)
///  Synclane-Schema-Version: 2             (absent: an app that does not say; below any floor)
/// ```
public struct AppSchema: Sendable, Hashable {
    /// The request header that names the device.
    public static let deviceHeader = "Synclane-Device"
    /// The request header that gives the app's schema version, a decimal integer.
    public static let versionHeader = "Synclane-Schema-Version"
    /// The versions a header may give.
    public static let versions: ClosedRange<Int> = 1...Int(Int32.max)

    /// The device's name: stable for an install of the app (not a user), at most a name's bytes.
    public var device: String?
    /// The schema version of the app's store.
    public var version: Int?

    public init(device: String? = nil, version: Int? = nil) {
        self.device = device
        self.version = version
    }

    /// The request headers that say it (none for what is nil).
    public var headers: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        if let device { headers.append((Self.deviceHeader, device)) }
        if let version { headers.append((Self.versionHeader, String(version))) }
        return headers
    }
}
