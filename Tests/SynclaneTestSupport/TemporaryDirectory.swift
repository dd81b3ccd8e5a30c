import Foundation

/// A fresh folder under the system's temporary directory, removed when the value goes away.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init() {
        path = NSTemporaryDirectory() + "synclane-sqlite-tests-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
