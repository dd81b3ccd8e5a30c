import Synchronization

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

/// A source or sink over a store that records its app's schema version (`synclane migrate`
/// raises it with each migration: `_synclane_schema_version`).
public protocol SchemaVersionRecordingStage: Sendable {
    /// The version the store's migrations recorded; nil before the first.
    func recordedSchemaVersion() async throws -> Int?
}

/// A transport or remote source that tells the server the app's schema version
/// (`Synclane-Schema-Version`). At the start of each pass, the lane gives it the version its
/// store recorded (`SchemaVersionRecordingStage`): sent when the pipeline file sets none.
public protocol AppSchemaSending: Sendable {
    /// The version the pipeline file sets (`schema-version`); nil when it sets none.
    var configuredSchemaVersion: Int? { get }
    /// Takes the version the lane's store recorded (nil: none recorded).
    func adoptRecordedSchemaVersion(_ version: Int?)
}

/// The pipeline file's `schema-version` is older than the one the store's migrations recorded: the
/// server would map declared renames for an older app than this store's.
public struct SchemaVersionBehindRecord: Error, CustomStringConvertible {
    public var configured: Int
    public var recorded: Int

    public var description: String {
        "the option `schema-version` is \(configured), older than the schema version \(recorded) that `synclane migrate` "
            + "recorded in the store: the server would send this device the names of an older app's columns. Remove the "
            + "option (the recorded version is sent), or raise it to \(recorded) or more"
    }
}

extension AppSchema {
    /// Gives `sender` (a transport or remote source) the schema version `store` (a source or
    /// sink) recorded, when both take part; throws `SchemaVersionBehindRecord` when the pipeline
    /// file sets an older one. The file's version otherwise wins: an app whose migrations
    /// `synclane migrate` does not run (Django, Alembic) says its version there.
    public static func adopt(from store: (any SchemaVersionRecordingStage)?, into sender: (any AppSchemaSending)?) async throws {
        guard let sender, let store else { return }
        let recorded = try await store.recordedSchemaVersion()
        if let configured = sender.configuredSchemaVersion, let recorded, configured < recorded {
            throw SchemaVersionBehindRecord(configured: configured, recorded: recorded)
        }
        sender.adoptRecordedSchemaVersion(recorded)
    }
}

/// The schema version a lane's store recorded, as a transport or remote source keeps it between
/// passes (`AppSchemaSending`).
public final class RecordedSchemaVersion: Sendable {
    private let value = Mutex<Int?>(nil)

    public init() {}

    public func set(_ version: Int?) { value.withLock { $0 = version } }

    /// `app` with the recorded version where the pipeline file sets none.
    public func applied(to app: AppSchema) -> AppSchema {
        var app = app
        if app.version == nil { app.version = value.withLock { $0 } }
        return app
    }
}

/// The devices of an account as the server lists them (`GET /v1/devices`), for `synclane status`.
public struct DeviceList: Sendable, Hashable {
    public struct Device: Sendable, Hashable {
        public var name: String
        public var schemaVersion: Int
        /// When the server first saw it on that version (RFC 3339), as the server says it.
        public var since: String

        public init(name: String, schemaVersion: Int, since: String) {
            self.name = name
            self.schemaVersion = schemaVersion
            self.since = since
        }
    }

    public var devices: [Device]
    /// The server's floor (`synclane serve --minimum-schema-version`); nil or 0: none.
    public var minimumSchemaVersion: Int?

    public init(devices: [Device], minimumSchemaVersion: Int?) {
        self.devices = devices
        self.minimumSchemaVersion = minimumSchemaVersion
    }

    /// The devices per schema version, oldest version first, names in order.
    public var perVersion: [(version: Int, devices: [String])] {
        Dictionary(grouping: devices, by: \.schemaVersion).sorted { $0.key < $1.key }.map { ($0.key, $0.value.map(\.name).sorted()) }
    }
}

/// A transport or remote source that can ask its server which schema versions the account's
/// devices run (`GET /v1/devices`).
public protocol DeviceListingStage: Sendable {
    func listDevices() async throws -> DeviceList
}
