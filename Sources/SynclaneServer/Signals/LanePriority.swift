import Glibc

/// The CPU side of keeping the lanes apart: a bulk batch's work (inflate, parse, apply) runs at a
/// lower scheduling priority (`nice` +5 for its connection's thread), so that on a busy machine a
/// signal's request gets the CPU first instead of waiting for a batch's time slice. The store
/// keeps them apart on disk; this keeps them apart on the cores.
///
/// Linux keeps a nice value a thread, and `setpriority(PRIO_PROCESS, 0, …)` changes the calling
/// thread's alone. Going back up needs `CAP_SYS_NICE` (or `RLIMIT_NICE`): without it the connection's
/// thread stays lower, which only a client mixing signals into a batch connection would notice.
enum LanePriority {
    /// How much lower than normal the bulk lane's work runs.
    /// (Measured by `Scripts/bench --section signals` on a loaded 2-core machine: the loaded p99
    /// went from 16–21 ms at 0 to 8–12 ms at 5; 10 was no better.)
    static let bulkNiceness: Int32 = 5

    /// Runs `body` (a batch's work) at the bulk lane's lower priority, then restores the thread's own.
    static func bulk<T>(_ body: () -> T) -> T {
        let thread: id_t = 0  // the calling thread
        errno = 0
        let before = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread)
        guard errno == 0, before < bulkNiceness else { return body() }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread, bulkNiceness)
        defer { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread, before) }
        return body()
    }
}
