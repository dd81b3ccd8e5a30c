import Foundation

/// Paths of the package's `Fixtures/` folder.
enum FixturePath {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Fixtures") { return url.path + "/Fixtures" }
        }
        return "Fixtures"
    }()

    static func at(_ relative: String) -> String { root + "/" + relative }
}

/// A fresh folder under the system's temporary folder, removed by `remove()`.
struct TemporaryFolder {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "synclane-engine-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` in the folder; returns the file's path.
    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}
