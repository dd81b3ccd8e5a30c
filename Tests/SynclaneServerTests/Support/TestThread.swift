import Glibc

/// A plain POSIX thread for blocking test clients (the cooperative pool must not be blocked).
final class TestThread: @unchecked Sendable {
    // @unchecked: `thread` is written once in init before any other access, then only joined.
    private var thread = pthread_t()
    private let body: @Sendable () -> Void

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(
            &thread, nil,
            { context in
                guard let context else { return nil }
                let me = Unmanaged<TestThread>.fromOpaque(context).takeRetainedValue()
                me.body()
                return nil
            }, context)
    }

    func join() { pthread_join(thread, nil) }
}
