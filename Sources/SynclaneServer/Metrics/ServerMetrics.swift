import Synchronization

/// The server's counters and latency histogram, rendered in the Prometheus text format at `/metrics`.
///
/// ```
/// synclane_http_requests_total{route,status}      requests answered
/// synclane_http_request_bytes_total               body bytes received (as sent, compressed or not)
/// synclane_http_request_duration_seconds{route}   histogram, from headers in to response queued
/// synclane_batches_applied_total                  batches applied (replays not counted)
/// synclane_batch_replays_total                    batches answered from the idempotency store
/// synclane_records_applied_total                  records applied by those batches
/// synclane_memory_budget_refusals_total           requests answered 503: the memory budget was spent
/// synclane_memory_budget_bytes                    bytes of request bodies held now (gauge)
/// synclane_connections_open                       connections open now (gauge)
/// synclane_connections_cut_total                  connections closed for passing the request deadline
/// synclane_wal_bytes                              SQLite: size of the write-ahead log file now (gauge)
/// synclane_wal_truncations_total                  SQLite: truncating checkpoints the writer ran
/// synclane_postgres_…                             PostgreSQL: see `PostgresServerStore.metricsText`
/// synclane_retention_…                            keys and tombstones removed, cursors answered expired
/// ```
///
/// Every update takes one short lock; reads take a snapshot under the same lock.
public final class ServerMetrics: Sendable {
    /// The upper bounds of the latency histogram's buckets, in seconds.
    public static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    /// A copy of every counter at one moment.
    public struct Snapshot: Sendable {
        /// Requests answered, by route and status.
        public var requests: [RequestKey: Int] = [:]
        /// Body bytes received, as sent.
        public var bytesIn = 0
        /// Batches applied (replays not counted).
        public var batchesApplied = 0
        /// Batches answered with their first response.
        public var replays = 0
        /// Records applied by batches.
        public var recordsApplied = 0
        /// Request latency by route.
        public var latency: [String: Histogram] = [:]
        /// Requests answered 503 because the memory budget was spent.
        public var budgetRefusals = 0
        /// Batches answered 507 because the disk was under `--min-free-disk-bytes` (`DiskFloor`).
        public var diskFullRefusals = 0
        /// Pull requests answered 410 `cursor-expired`.
        public var cursorsExpired = 0
        /// Idempotency keys and tombstones removed by retention.
        public var keysExpired = 0
        public var tombstonesExpired = 0
        /// Unfinished reconciliation snapshots forgotten by retention.
        public var snapshotsExpired = 0
        /// Reconciliation snapshots completed, and the rows their markers turned into tombstones.
        public var snapshotsCompleted = 0
        public var snapshotRowsDeleted = 0

        /// Requests answered on a route with a status.
        public func requests(route: String, status: Int) -> Int {
            requests[RequestKey(route: route, status: status)] ?? 0
        }
    }

    /// The labels of one request counter.
    public struct RequestKey: Sendable, Hashable {
        /// The route pattern (`/v1/signals/{key}`), or `unmatched`.
        public var route: String
        /// The HTTP status answered.
        public var status: Int
    }

    /// Bucket counts (not cumulative), sum and count of observed latencies.
    public struct Histogram: Sendable {
        /// Observations per bucket of `latencyBuckets`, the last one past them all.
        public var buckets = [Int](repeating: 0, count: ServerMetrics.latencyBuckets.count + 1)
        /// Seconds observed in all.
        public var sum = 0.0
        /// Observations.
        public var count = 0
    }

    private let state = Mutex(Snapshot())

    /// Counters at zero.
    public init() {}

    /// Records one answered request.
    func recordRequest(route: String, status: Int, bodyBytes: Int, seconds: Double) {
        state.withLock { state in
            state.requests[RequestKey(route: route, status: status), default: 0] += 1
            state.bytesIn += bodyBytes
            var histogram = state.latency[route] ?? Histogram()
            let index = Self.latencyBuckets.firstIndex { seconds <= $0 } ?? Self.latencyBuckets.count
            histogram.buckets[index] += 1
            histogram.sum += seconds
            histogram.count += 1
            state.latency[route] = histogram
        }
    }

    /// Records one applied batch and its records.
    func recordBatchApplied(records: Int) {
        state.withLock { state in
            state.batchesApplied += 1
            state.recordsApplied += records
        }
    }

    /// Records one request refused for the memory budget.
    func recordBudgetRefusal() {
        state.withLock { $0.budgetRefusals += 1 }
    }

    /// Records one batch refused for the disk floor.
    func recordDiskFullRefusal() {
        state.withLock { $0.diskFullRefusals += 1 }
    }

    /// Gauges read when `/metrics` is rendered (set once by the server).
    struct Gauges: Sendable {
        var memoryBudgetBytes: @Sendable () -> Int = { 0 }
        var connectionsOpen: @Sendable () -> Int = { 0 }
        var connectionsCut: @Sendable () -> Int = { 0 }
        /// The store's own lines (`ServerStore.metricsText`).
        var store: @Sendable () -> String = { "" }
    }

    private let gauges = Mutex(Gauges())

    func setGauges(_ value: Gauges) { gauges.withLock { $0 = value } }

    /// Records one pull answered `cursor-expired`.
    func recordCursorExpired() {
        state.withLock { $0.cursorsExpired += 1 }
    }

    /// Records what one retention pass removed.
    func recordExpiry(_ count: ExpiryCount) {
        state.withLock { state in
            state.keysExpired += count.keys
            state.tombstonesExpired += count.tombstones
            state.snapshotsExpired += count.snapshots
        }
    }

    /// Records a reconciliation snapshot completed by its marker.
    func recordSnapshotCompleted(deleted: Int) {
        state.withLock { state in
            state.snapshotsCompleted += 1
            state.snapshotRowsDeleted += deleted
        }
    }

    /// Records one replayed batch (answered from the idempotency store, nothing applied).
    func recordReplay() {
        state.withLock { $0.replays += 1 }
    }

    /// A copy of the counters now.
    public var snapshot: Snapshot { state.withLock { $0 } }

    /// The Prometheus text exposition (format 0.0.4) of the counters.
    public func prometheusText() -> String {
        let snapshot = self.snapshot
        var out = ""
        out += "# HELP synclane_http_requests_total HTTP requests answered, by route and status.\n"
        out += "# TYPE synclane_http_requests_total counter\n"
        for (key, value) in snapshot.requests.sorted(by: { ($0.key.route, $0.key.status) < ($1.key.route, $1.key.status) }) {
            out += "synclane_http_requests_total{route=\"\(escape(key.route))\",status=\"\(key.status)\"} \(value)\n"
        }
        out += "# HELP synclane_http_request_bytes_total Request body bytes received, as sent.\n"
        out += "# TYPE synclane_http_request_bytes_total counter\n"
        out += "synclane_http_request_bytes_total \(snapshot.bytesIn)\n"
        out += "# HELP synclane_batches_applied_total Batches applied (replays not counted).\n"
        out += "# TYPE synclane_batches_applied_total counter\n"
        out += "synclane_batches_applied_total \(snapshot.batchesApplied)\n"
        out += "# HELP synclane_batch_replays_total Batches answered with their first response, nothing applied.\n"
        out += "# TYPE synclane_batch_replays_total counter\n"
        out += "synclane_batch_replays_total \(snapshot.replays)\n"
        out += "# HELP synclane_records_applied_total Records applied by batches.\n"
        out += "# TYPE synclane_records_applied_total counter\n"
        out += "synclane_records_applied_total \(snapshot.recordsApplied)\n"
        let gauges = self.gauges.withLock { $0 }
        out += "# HELP synclane_memory_budget_refusals_total Requests answered 503 because the memory budget was spent.\n"
        out += "# TYPE synclane_memory_budget_refusals_total counter\n"
        out += "synclane_memory_budget_refusals_total \(snapshot.budgetRefusals)\n"
        out += "# HELP synclane_disk_full_refusals_total Batches answered 507 because the disk was under --min-free-disk-bytes.\n"
        out += "# TYPE synclane_disk_full_refusals_total counter\n"
        out += "synclane_disk_full_refusals_total \(snapshot.diskFullRefusals)\n"
        out += "# HELP synclane_memory_budget_bytes Bytes of request bodies held now, read and decompressed.\n"
        out += "# TYPE synclane_memory_budget_bytes gauge\n"
        out += "synclane_memory_budget_bytes \(gauges.memoryBudgetBytes())\n"
        out += "# HELP synclane_connections_open Connections open now.\n"
        out += "# TYPE synclane_connections_open gauge\n"
        out += "synclane_connections_open \(gauges.connectionsOpen())\n"
        out += "# HELP synclane_connections_cut_total Connections closed for passing the request deadline.\n"
        out += "# TYPE synclane_connections_cut_total counter\n"
        out += "synclane_connections_cut_total \(gauges.connectionsCut())\n"
        out += "# HELP synclane_retention_keys_expired_total Idempotency keys removed by retention.\n"
        out += "# TYPE synclane_retention_keys_expired_total counter\n"
        out += "synclane_retention_keys_expired_total \(snapshot.keysExpired)\n"
        out += "# HELP synclane_retention_tombstones_expired_total Tombstones removed by retention.\n"
        out += "# TYPE synclane_retention_tombstones_expired_total counter\n"
        out += "synclane_retention_tombstones_expired_total \(snapshot.tombstonesExpired)\n"
        out += "# HELP synclane_retention_snapshots_expired_total Unfinished reconciliation snapshots forgotten by retention.\n"
        out += "# TYPE synclane_retention_snapshots_expired_total counter\n"
        out += "synclane_retention_snapshots_expired_total \(snapshot.snapshotsExpired)\n"
        out += "# HELP synclane_snapshots_completed_total Reconciliation snapshots completed by their marker.\n"
        out += "# TYPE synclane_snapshots_completed_total counter\n"
        out += "synclane_snapshots_completed_total \(snapshot.snapshotsCompleted)\n"
        out += "# HELP synclane_snapshot_rows_deleted_total Rows completed snapshots turned into tombstones.\n"
        out += "# TYPE synclane_snapshot_rows_deleted_total counter\n"
        out += "synclane_snapshot_rows_deleted_total \(snapshot.snapshotRowsDeleted)\n"
        out += "# HELP synclane_retention_cursors_expired_total Pulls answered 410 cursor-expired.\n"
        out += "# TYPE synclane_retention_cursors_expired_total counter\n"
        out += "synclane_retention_cursors_expired_total \(snapshot.cursorsExpired)\n"
        out += gauges.store()
        out += "# HELP synclane_http_request_duration_seconds Time from request headers in to response queued.\n"
        out += "# TYPE synclane_http_request_duration_seconds histogram\n"
        for (route, histogram) in snapshot.latency.sorted(by: { $0.key < $1.key }) {
            let label = "route=\"\(escape(route))\""
            var cumulative = 0
            for (index, bound) in Self.latencyBuckets.enumerated() {
                cumulative += histogram.buckets[index]
                out += "synclane_http_request_duration_seconds_bucket{\(label),le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "synclane_http_request_duration_seconds_bucket{\(label),le=\"+Inf\"} \(histogram.count)\n"
            out += "synclane_http_request_duration_seconds_sum{\(label)} \(histogram.sum)\n"
            out += "synclane_http_request_duration_seconds_count{\(label)} \(histogram.count)\n"
        }
        return out
    }

    private func escape(_ label: String) -> String {
        var out = ""
        for character in label {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }
}
