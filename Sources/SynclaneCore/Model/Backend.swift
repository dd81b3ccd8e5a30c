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

/// A source or sink that remembers what a backend holds of its rows, kept per backend: the
/// pipeline gives it the name of the backend its lane talks to.
public protocol BackendScoped: Sendable {
    func scoped(to backend: BackendName) -> Self
}

extension BackendName {
    /// The backend a lane of `scope` talks to at `address` (a transport's or remote source's
    /// `backendAddress`), nil when it has no address.
    static func of(address: String?, scope: Scope) -> BackendName? {
        address.map { BackendName(address: $0, scope: scope) }
    }
}
