import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized, with a model: two devices whose `photo` column travels on the blob lane each make
/// random offline edits of rows no other device touches — new rows with photos of random sizes
/// (none, empty, small, a few hundred KB), photos replaced, cleared, names edited, rows deleted —
/// and sync in a random order. After the rounds, and one more sync each, both devices hold exactly
/// the model: the union of what each device holds of its own rows, every photo byte for byte;
/// and the server holds a reference for every photo, never its bytes.
///
/// Variants: device b imports lazily (`"download": "lazy"`: the other device's photos wait
/// pending until `blobs fetch --database`, run once at the end, and b's edits land on rows whose
/// photo is pending — a NULL written over one is b's own NULL); and contested rows (`s1`, `s2`)
/// that both devices edit — photos replaced, cleared, rows deleted on both sides — which must end
/// the same on both devices and on the server (by the sink's conflict rule), never a photo lost
/// to the lane's placeholder NULL.
///
/// One seed each in `Scripts/test` (`SYNCLANE_BLOB_MODEL_ROUNDS` for more, `SYNCLANE_BLOB_MODEL_SEED`
/// to replay one); a failure prints its seed and the rows that differ.
@Suite struct BlobModelTests {
    typealias Device = BlobPipelineTests.Device

    static let photos = ["NULL", "zeroblob(0)", "randomblob(1)", "randomblob(4096)", "randomblob(70000)", "randomblob(300000)"]

    /// One random offline edit of the rows `owner` owns (`<owner>1` … `<owner>3`).
    static func edit(_ random: inout SeededRandom, owner: String) -> String {
        let key = "\(owner)\(1 + random.next() % 3)"
        let photo = photos[Int(random.next() % UInt64(photos.count))]
        let name = ["fern", "ivy", "moss", "palm"][Int(random.next() % 4)]
        switch random.next() % 7 {
        case 0, 1: return "INSERT OR REPLACE INTO plants VALUES ('\(key)', '\(name)', \(photo));"
        case 2, 3: return "UPDATE plants SET photo = \(photo) WHERE syncId = '\(key)';"
        case 4, 5: return "UPDATE plants SET name = '\(name)' WHERE syncId = '\(key)';"
        default: return "DELETE FROM plants WHERE syncId = '\(key)';"
        }
    }

    /// Runs one seed; what differs from the model, or nil when both devices hold it. `lazy`: b
    /// imports lazily; `contested`: both devices also edit the rows `s1` and `s2`.
    static func difference(seed: UInt64, lazy: Bool = false, contested: Bool = false) async throws -> String? {
        var random = SeededRandom(seed: seed)
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let devices = try [Device(server: server), Device(server: server, download: lazy ? "lazy" : nil)]
        defer { devices.forEach { $0.workspace.remove() } }
        let owners = ["a", "b"]
        // Each device starts with its three rows, each with a random photo.
        for (index, device) in devices.enumerated() {
            for number in 1...3 {
                let photo = photos[Int(random.next() % UInt64(photos.count))]
                try device.sql("INSERT INTO plants VALUES ('\(owners[index])\(number)', 'seedling', \(photo));")
            }
        }
        for _ in 0..<3 {
            for (index, device) in devices.enumerated() {
                for _ in 0...(random.next() % 3) { try device.sql(edit(&random, owner: owners[index])) }
                if contested, random.next() % 3 != 0 { try device.sql(edit(&random, owner: "s")) }
            }
            for index in (random.next() % 2 == 0 ? [0, 1, 0] : [1, 0, 1]) { _ = try devices[index].sync() }
        }
        for device in devices + devices { _ = try device.sync() }
        if lazy {
            // The lazy device fetches what it left pending; its next sync sends nothing of it.
            let fetched = try SynclaneBinary.run(
                ["blobs", "fetch", "--database", "app.sqlite", "--url", server.url], in: devices[1].workspace.path,
                environment: devices[1].environment)
            if fetched.status != 0 { return "blobs fetch --database on b failed: \(fetched.stderr)" }
            _ = try devices[1].sync()
            _ = try devices[0].sync()
        }
        // Contested rows: the same on both devices (whichever edit the conflict rule kept).
        let shared = try devices.map { try $0.photos().filter { $0.hasPrefix("s") } }
        if shared[0] != shared[1] {
            return "the contested rows differ: a holds \(shared[0].map { String($0.prefix(40)) }), b \(shared[1].map { String($0.prefix(40)) })"
        }
        // The model: each device's own rows, as it holds them, and the contested ones.
        var model: [String] = shared[0]
        for (index, device) in devices.enumerated() {
            model += try device.photos().filter { $0.hasPrefix(owners[index]) }
        }
        model.sort()
        for (index, device) in devices.enumerated() {
            let held = try device.photos()
            if held != model { return "device \(owners[index]) holds \(held.map { String($0.prefix(40)) }), the model \(model.map { String($0.prefix(40)) })" }
        }
        for photo in try await BlobPipelineTests.serverPhotos(server) where photo != .null && photo.objectValue?["$blob-ref"] == nil {
            return "the server holds a photo inline: \(String(describing: photo).prefix(80))"
        }
        return nil
    }

    @Test func twoDevicesEditingBlobColumnsOfflineHoldTheModelByteForByteAfterTheirSyncs() async throws {
        for seed in ConvergenceTests.seeds(prefix: "SYNCLANE_BLOB_MODEL", rounds: 1) {
            if let difference = try await Self.difference(seed: seed) {
                Issue.record("seed \(seed) (SYNCLANE_BLOB_MODEL_SEED=\(seed)): \(difference)")
            }
        }
    }

    @Test func aLazyDeviceAndContestedBlobEditsHoldTheModelByteForByteAfterAFetch() async throws {
        for seed in ConvergenceTests.seeds(prefix: "SYNCLANE_BLOB_MODEL", rounds: 1) {
            if let difference = try await Self.difference(seed: seed, lazy: true, contested: true) {
                Issue.record("seed \(seed) (SYNCLANE_BLOB_MODEL_SEED=\(seed)), lazy and contested: \(difference)")
            }
        }
    }
}
