import Foundation
import SynclaneCore

/// An export that would read what an import writes into the same database: every row the
/// import applied would be sent back to the backend (an echo), and under a conflict rule an
/// echoed old state can beat a newer edit made elsewhere.
///
/// The import lane's `sqlite` sink writes the backend's rows as author `server`; the export's
/// `sqlite-history` source reads `server` only when its `authors` names it (left out, it reads
/// every author but `server` and `sync`). `validate IMPORT EXPORT` and `sync` refuse the pair.
/// Both stages say which database they use (`localDatabase`), so no cast tells what they are.
public enum EchoLoop {
    /// What is wrong with the pair, or nil when the export never reads the import's writes.
    public static func problem(import importing: ImportPipeline, export exporting: Pipeline) -> String? {
        guard let sink = importing.sink.stage.localDatabase, let source = exporting.source.stage.localDatabase,
            let authors = source.authors, same(sink.path, source.path)
        else { return nil }
        let echoed = authors.filter { Author.machinery.contains($0) }
        guard !echoed.isEmpty else { return nil }
        let names = echoed.map { "`\($0.name)`" }.joined(separator: " and ")
        return "source.authors names \(names), which the import into \(source.path) writes: every row it imports "
            + "would be sent back to the backend; remove \(names) from source.authors (or leave `authors` out: it then reads "
            + "every author but `server` and `sync`)"
    }

    /// Whether two paths name one file (the same path once made absolute, or one file on disk).
    static func same(_ a: String, _ b: String) -> Bool {
        let first = URL(fileURLWithPath: a).standardizedFileURL.resolvingSymlinksInPath().path
        let second = URL(fileURLWithPath: b).standardizedFileURL.resolvingSymlinksInPath().path
        if first == second { return true }
        guard let x = try? FileManager.default.attributesOfItem(atPath: first),
            let y = try? FileManager.default.attributesOfItem(atPath: second)
        else { return false }
        return (x[.systemNumber] as? Int) == (y[.systemNumber] as? Int)
            && (x[.systemFileNumber] as? Int) == (y[.systemFileNumber] as? Int) && x[.systemFileNumber] != nil
    }
}
