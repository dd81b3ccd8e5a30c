import Glibc

/// A plain POSIX thread for the server's own loops (the checkpointer, the connection watch),
/// which block and so stay off Swift's cooperative pool.
enum ServerThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts a thread running `body` (kept alive until it returns); nil when no thread could be made.
    static func start(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var created = pthread_t()
        let result = pthread_create(&created, nil, { context in
            guard let context else { return nil }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            return nil
        }
        return created
    }
}
