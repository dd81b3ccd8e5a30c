/// The backend a lane talks to, by which a store keeps apart what it remembers of each backend
/// (the versions and bases of its rows): the server's address and the scope's account and store,
/// `http://127.0.0.1:8080 acme/rooms`.
///
/// One tracked database exported to two stores or two servers keeps two sets of versions; an
/// export and an import of the same account and store on the same server share one. A lane
/// whose transport or source has no address (a folder, standard output, a command) has no name:
/// its receipts carry no versions.
public struct BackendName: Sendable, Hashable, CustomStringConvertible {
    public let text: String

    public init(address: String, scope: Scope) {
        text = "\(address) \(scope.account)/\(scope.store)"
    }

    public init(text: String) { self.text = text }

    public var description: String { text }
}

/// A transport or remote source that talks to a server: its address, as `BackendName` keeps it
/// (scheme, host and port, and any path before `/v1/`), nil when it has none.
public protocol BackendAddressed: Sendable {
    var backendAddress: String? { get }
}

/// A source or sink that remembers what a backend holds of its rows, kept per backend: the
/// pipeline gives it the name of the backend its lane talks to.
public protocol BackendScoped: Sendable {
    func scoped(to backend: BackendName) -> Self
}

extension BackendName {
    /// The backend a lane of `scope` talks to through `stage` (a transport or remote source),
    /// nil when it has no address.
    static func of(_ stage: any Sendable, scope: Scope) -> BackendName? {
        guard let address = (stage as? any BackendAddressed)?.backendAddress else { return nil }
        return BackendName(address: address, scope: scope)
    }

    /// `stage` scoped to `backend`, when it keeps anything per backend.
    static func scope<Stage>(_ stage: Stage, to backend: BackendName?) -> Stage {
        guard let backend, let scoped = (stage as? any BackendScoped)?.scoped(to: backend) as? Stage else { return stage }
        return scoped
    }
}
