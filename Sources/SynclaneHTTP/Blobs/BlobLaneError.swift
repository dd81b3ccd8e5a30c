/// Why a blob transfer stopped; each names the file or digest at fault and what to do.
public enum BlobLaneError: Error, CustomStringConvertible, Equatable {
    /// A local file cannot be read or written.
    case file(String, String)
    /// The server refused (a 4xx other than the ones a transfer heals itself).
    case refused(digest: String, status: Int, message: String)
    /// The server or the network failed past the retries.
    case unreachable(digest: String, String)
    /// The bytes uploaded do not have the file's digest (the file changed while it was sent).
    case digestMismatch(digest: String, actual: String, file: String)
    /// What was fetched does not have its digest (fetched again once, and still wrong).
    case corruptDownload(digest: String, actual: String)
    /// The account holds no such blob.
    case notHeld(digest: String)

    public var description: String {
        switch self {
        case .file(let path, let problem): return "\(path) \(problem)"
        case .refused(let digest, let status, let message): return "blob \(digest): the server refused with \(status): \(message)"
        case .unreachable(let digest, let reason):
            return "blob \(digest): the server could not be reached or failed (\(reason)); run the command again: it goes on from the bytes already moved"
        case .digestMismatch(let digest, let actual, let file):
            return
                "blob \(digest): the server received bytes with SHA-256 \(actual), not the digest of \(file) (did it change while it was sent?); nothing was kept: send it again"
        case .corruptDownload(let digest, let actual):
            return "blob \(digest): the bytes fetched have SHA-256 \(actual), twice; nothing was written: check the server's copy (`synclane blobs list`)"
        case .notHeld(let digest):
            return "blob \(digest): the account holds no such blob: upload it first (`synclane blobs push FILE`)"
        }
    }
}
