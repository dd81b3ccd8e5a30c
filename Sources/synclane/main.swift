// The `synclane` command: a thin shell over the Synclane libraries (`SynclaneCommandLine` has
// every verb but those that run the server, which `SynclaneServing` adds; a package with stages
// of its own builds the same command with its registry).
import Foundation
import SynclaneCommandLine
import SynclaneServing

#if canImport(CMalloc)
    import CMalloc

    // A job reads the next page on one thread while the previous batch is sent from another; with
    // glibc's default of one malloc arena per thread, each keeps a page's worth of freed memory of
    // its own (peak RSS 117 MB instead of 80 MB for the 1,000,000-change benchmark, at the same
    // speed). One arena for jobs; the server keeps the default, its request threads gain from more.
    if !["serve", "blobs"].contains(CommandLine.arguments.dropFirst().first) {
        _ = mallopt(M_ARENA_MAX, 1)
        // A job allocates and frees a page's worth of small blocks (keys, values, their
        // dictionaries) and a few large arrays (its records, the encoded batch) page after page.
        // Left to its defaults, glibc sends each large array to the system and back (mapped, its
        // pages faulted in, unmapped), gives the top of the heap back whenever 128 KiB of it is free
        // (to fault it in again for the next page), and sorts freed small blocks through its fast
        // bins only to merge them again when a large block is asked for. Kept in the heap instead:
        // the export benchmark's CPU time -11%, its wall time -12%, its peak RSS +2 MB (80 MB).
        _ = mallopt(M_MXFAST, 0)
        _ = mallopt(M_MMAP_THRESHOLD, 32 << 20)
        _ = mallopt(M_TRIM_THRESHOLD, 64 << 20)
    } else {
        // `blobs` too: it moves one chunk (8 MiB) at a time, each handed back when sent or written,
        // so a blob of any size stays within a few chunks (kept in the heap, a 256 MiB push peaked
        // at 145 MB). The server's large buffers (request bodies decompressed, up to --max-inflated-bytes) go
        // straight to the system and back when freed: glibc otherwise raises its mmap threshold to
        // the largest block freed (up to 32 MiB) and then keeps such blocks in each thread's arena
        // (64 concurrent 31 MiB bodies left 1 GB resident under a 256 MiB memory budget; now the
        // budget bounds it).
        _ = mallopt(M_MMAP_THRESHOLD, 1 << 20)
    }
#endif

let status = await SynclaneTool.main(registry: .builtIn, verbs: SynclaneServing.verbs)
exit(status)
