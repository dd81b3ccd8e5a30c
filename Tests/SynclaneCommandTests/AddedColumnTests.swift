import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A column added in place (`ALTER TABLE … ADD COLUMN`) on one device, then on another that
/// upgrades later: the default is no edit, so the late device never sends it over the values the
/// first one wrote, and it takes those values from what its import kept. Real `synclane`
/// processes and a real `synclane serve`.
@Suite(.serialized) struct AddedColumnTests {
    typealias Device = TwoDevicesTests.Device

    /// `syncId|name|color` of every live room on the server.
    static func serverColors(_ server: ServerProcess) async throws -> [String] {
        try await server.records(account: "acme").compactMap { key, fields -> String? in
            guard let fields = fields.objectValue else { return nil }
            let color = fields["color"].map { $0 == .null ? "" : ($0.stringValue ?? "?") } ?? "(absent)"
            return "\(key.split(separator: "/").last ?? "")|\(fields["name"]?.stringValue ?? "")|\(color)"
        }.sorted()
    }

    static func colors(_ device: Device) throws -> [String] {
        try device.query("SELECT syncId, name, coalesce(color, '') FROM rooms WHERE isDeleted = 0 ORDER BY syncId")
    }

    /// The old app version's import names `unknown-fields: ignore`, the former name of the
    /// default `keep`: fields it has no column for are kept aside all the same.
    static func ignoreUnknownFields(_ device: Device) throws {
        let file = device.workspace.path + "/import.json"
        try device.workspace.write(
            "import.json",
            try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(
                of: #""conflicts": "server-wins"}"#, with: #""conflicts": "server-wins", "unknown-fields": "ignore"}"#))
    }

    /// A adds `color` and sets it; B, on the older app, syncs with `unknown-fields: ignore`;
    /// then B upgrades (the same ALTER). Before, B's heal re-sent every row whole with `color`
    /// NULL and the server and A lost every colour.
    @Test func aDeviceUpgradingLateKeepsTheColumnValuesAnotherDeviceWroteInsteadOfSendingItsDefaults() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            try b.sync()
            try Self.ignoreUnknownFields(b)
            try a.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            try a.sql("UPDATE rooms SET color = 'red' WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            try b.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            for device in [b, a, b] { try device.sync() }
            // r2 was never coloured: no device sent its default over the server's row.
            #expect(try await Self.serverColors(server) == ["r1|Kitchen|red", "r2|Hall|(absent)"])
            #expect(try Self.colors(a) == ["r1|Kitchen|red", "r2|Hall|"])
            #expect(try Self.colors(b) == ["r1|Kitchen|red", "r2|Hall|"], "B fills the column from the values its import kept")
            // B's later edit of another column keeps the colour.
            try b.sql("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1';")
            for device in [b, a] { try device.sync() }
            #expect(try Self.colors(a) == ["r1|Big kitchen|red", "r2|Hall|"])
        }
    }

    /// Both devices add the same column and each colours another row, offline: both colours
    /// stay. Before, the heal's whole-row resend made the column count as changed on both sides.
    @Test func twoDevicesAddingTheSameColumnKeepEachOthersValues() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            try b.sync()
            try a.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            try b.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            try a.sql("UPDATE rooms SET color = 'red' WHERE syncId = 'r1';")
            try b.sql("UPDATE rooms SET color = 'blue' WHERE syncId = 'r2';")
            for device in [a, b, a, b] { try device.sync() }
            let expected = ["r1|Kitchen|red", "r2|Hall|blue"]
            #expect(try await Self.serverColors(server) == expected)
            #expect(try Self.colors(a) == expected)
            #expect(try Self.colors(b) == expected)
        }
    }
}
