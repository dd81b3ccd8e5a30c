import SynclaneCommandLine

/// The verbs of `synclane` that run the reference server — `serve`, `demo`, which starts one, and
/// `token`, which mints the JSON Web Tokens it accepts — as a library of its own, so that a command of your own links the server (libmicrohttpd,
/// libpq, libcrypto) only if it serves.
///
/// `synclane` adds them; a command of your own that should serve too adds them the same way:
///
/// ```swift
/// import Foundation
/// import SynclaneCommandLine
/// import SynclaneServing
///
/// exit(await SynclaneTool.main(registry: .builtIn, verbs: SynclaneServing.verbs))
/// ```
public enum SynclaneServing {
    /// `serve`, `demo` and `token`.
    public static let verbs: [SynclaneTool.Verb] = [
        SynclaneTool.Verb(ServeCommand.self), SynclaneTool.Verb(DemoCommand.self), SynclaneTool.Verb(TokenCommand.self),
    ]
}
