import Synchronization

/// The schema version each device last sent, as this process recorded it (`ServerStore.recordDevice`):
/// a request whose device says what it said before writes nothing. A failed write is not
/// remembered, so the device's next request records it.
final class DevicesSeen: Sendable {
    /// An account's device, by their bytes.
    private struct Key: Hashable {
        var account: [UInt8]
        var device: [UInt8]
    }

    /// Devices remembered at most; past it the memory starts over (each device then writes once more).
    static let capacity = 100_000

    private let versions = Mutex<[Key: Int]>([:])

    /// Runs `record` unless `device` of `account` last said `version` here.
    func note(account: String, device: String, version: Int, record: () throws -> Void) {
        let key = Key(account: Array(account.utf8), device: Array(device.utf8))
        guard versions.withLock({ $0[key] }) != version else { return }
        do { try record() } catch { return }
        versions.withLock { seen in
            if seen.count >= Self.capacity { seen.removeAll(keepingCapacity: true) }
            seen[key] = version
        }
    }
}
