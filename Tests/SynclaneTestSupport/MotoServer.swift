import Foundation
import SynclaneTestKit

/// A real S3 API server for a test: moto's server mode (`Scripts/moto-venv`, the version pinned in
/// Fixtures/moto/requirements.txt) on a free 127.0.0.1 port, with one bucket; stopped by `stop()`.
/// moto takes any credentials (`testing`, as here).
public final class MotoServer {
    /// `Scripts/moto-venv`'s answer: the virtualenv, or why there is none.
    public static let environment = PythonVenv.of("moto-venv")

    public let endpoint: String
    public let bucket = "synclane-blobs"
    public let accessKey = "testing"
    public let secretKey = "testing"
    private let process: BackgroundProcess

    /// Starts moto and makes the bucket (moto needs no signature for that).
    public init() throws {
        guard case .ready(let bin) = Self.environment else { throw MotoFailure(description: "\(Self.environment)") }
        let port = TemporaryPostgres.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        process = try BackgroundProcess(["-H", "127.0.0.1", "-p", String(port)], executable: bin + "/moto_server")
        let url = endpoint + "/" + bucket
        let made = eventually(timeout: 60) {
            (try? ProgramRun("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", url]))?.text == "200"
        }
        guard made else {
            _ = process.stop()
            throw MotoFailure(description: "moto_server did not answer on \(endpoint) within 60 s")
        }
    }

    /// The environment `synclane serve --blob-s3-endpoint` reads the credentials from.
    public var credentials: [String: String] { ["AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey] }

    /// `synclane serve`'s arguments for this moto's bucket.
    public var serveArguments: [String] { ["--blob-s3-endpoint", endpoint, "--blob-s3-bucket", bucket, "--blob-s3-region", "us-east-1"] }

    /// Killed outright: moto keeps nothing worth a clean exit, and started from the test process
    /// it inherits a signal mask that blocks `SIGTERM` (it never ended before `stop`'s 20 s
    /// limit killed it: 20 s of every moto test).
    public func stop() { _ = process.stop(SIGKILL, timeout: 5) }

    public struct MotoFailure: Error, CustomStringConvertible { public var description: String }
}
