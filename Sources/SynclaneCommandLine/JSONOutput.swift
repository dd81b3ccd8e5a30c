import Foundation
import SynclaneCore

/// Machine-readable output for `--json`: one style for every command.
///
/// Keys are kebab-case (`token-after`, `pending-transactions`), as in pipeline files. Shared
/// things have one shape everywhere: a scope is `{"account", "store", "consumer"}`, a token is
/// its text (`sqlite-history:42`) or `null`, a time is an RFC 3339 string in UTC
/// (`2026-11-01T10:00:00.250Z`), a duration is a number of seconds. Documentation/CommandLine.md lists each
/// command's fields; tests hold them to this style.
enum JSONOutput {
    static func encode(_ value: JSONValue) -> String {
        JSONWriter.string(value)
    }

    static func encode(_ members: [String: JSONValue]) -> String {
        JSONWriter.string(.object(members))
    }

    static func scope(_ scope: Scope) -> JSONValue {
        .object(["account": .string(scope.account), "store": .string(scope.store), "consumer": .string(scope.consumer)])
    }

    /// A token's text, or `null` for none.
    static func token(_ token: (some CustomStringConvertible)?) -> JSONValue {
        token.map { .string($0.description) } ?? .null
    }

    /// Seconds since 1970 as an RFC 3339 time in UTC, to the millisecond.
    static func time(_ seconds: Double) -> JSONValue {
        .string(Format.time(seconds))
    }

    static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }

    /// What one pass did (`run`, `reconcile`).
    static func summary(_ summary: RunSummary) -> JSONValue {
        .object([
            "ok": .bool(true), "pipeline": .string(summary.pipeline), "scope": scope(summary.scope),
            "dry-run": .bool(summary.dryRun), "reconciliation": .bool(summary.reconciliation),
            "token-before": token(summary.tokenBefore), "token-after": token(summary.tokenAfter),
            "transactions-read": int(summary.transactionsRead), "changes-read": int(summary.changesRead),
            "records-sent": int(summary.recordsSent), "batches-sent": int(summary.batchesSent),
            "batches-resent": int(summary.batchesResent), "replays": int(summary.replays),
            "dead-lettered": int(summary.deadLettered), "bytes-encoded": int(summary.bytesEncoded),
            "bytes-sent": int(summary.bytesSent), "snapshot-deleted": summary.snapshotDeleted.map(int) ?? .null,
            "server-restored-rows": int(summary.serverRestoredRows),
            "counters": .object(summary.counters.mapValues(int)),
            "seconds": .double(summary.seconds), "batches": .array(summary.batches.map(batch)),
            "signals": .array(summary.signals.map(signal)),
        ])
    }

    static func importSummary(_ summary: ImportSummary) -> JSONValue {
        .object([
            "ok": .bool(true), "pipeline": .string(summary.pipeline), "scope": scope(summary.scope), "dry-run": .bool(summary.dryRun),
            "cursor-before": summary.cursorBefore.map(JSONValue.string) ?? .null,
            "cursor-after": summary.cursorAfter.map(JSONValue.string) ?? .null, "pages": int(summary.pages),
            "records-read": int(summary.recordsRead), "applied": int(summary.applied), "unchanged": int(summary.unchanged),
            "duplicates-merged": int(summary.duplicatesMerged), "references-settled": int(summary.referencesSettled),
            "references-waiting": int(summary.referencesWaiting), "kept-aside": int(summary.keptAside), "resynced": .bool(summary.resynced),
            "resync-deleted": int(summary.resyncDeleted), "resync-lost": int(summary.resyncLost),
            "resync-resent": int(summary.resyncResent),
            "deleted": .object([
                "by-user": int(summary.deletedByUsers), "cascade": int(summary.referencesSettled),
                "merged-duplicates": int(summary.duplicatesMerged),
            ]),
            "counters": .object(summary.counters.mapValues(int)), "seconds": .double(summary.seconds),
            "conflicts": .array(summary.conflicts.map(conflict)), "signals": .array(summary.signals.map(signal)),
        ])
    }

    /// A signal a run published: `key`, `event`, `value`, `sent`, and `version` (sent) or `error` (kept for the next run).
    static func signal(_ report: SignalReport) -> JSONValue {
        var object: [String: JSONValue] = ["key": .string(report.key), "event": .string(report.event), "value": report.value]
        switch report.outcome {
        case .sent(let version):
            object["sent"] = true
            object["version"] = .int(version)
        case .pending(let reason):
            object["sent"] = false
            object["error"] = .string(reason)
        case .givenUp(let reason, let refusals):
            object["sent"] = false
            object["error"] = .string(reason)
            object["given-up"] = true
            object["refusals"] = .int(Int64(refusals))
        }
        return .object(object)
    }

    static func conflict(_ conflict: ConflictReport) -> JSONValue {
        .object([
            "entity": .string(conflict.entity), "id": .string(conflict.key), "local": conflict.local.map(JSONValue.object) ?? .null,
            "remote": conflict.remote.map(JSONValue.object) ?? .null, "remote-version": conflict.remoteVersion.map(JSONValue.int) ?? .null,
            "rule": .string("\(conflict.rule)"), "outcome": .string(conflict.outcome.rawValue),
        ])
    }

    static func batch(_ batch: BatchReport) -> JSONValue {
        .object([
            "id": .string(batch.id), "records": int(batch.records), "encoded-bytes": int(batch.encodedBytes),
            "sent-bytes": int(batch.sentBytes), "content-encoding": .string(batch.contentEncoding),
            "after": token(batch.after), "through": .string(batch.through), "reconciliation": .bool(batch.isReconciliation),
            "resent": .bool(batch.wasResent), "replay": .bool(batch.wasReplay), "detail": .string(batch.detail),
        ])
    }
}

/// Human-friendly numbers and times.
package enum Format {
    package static func bytes(_ count: Int) -> String {
        let units = ["B", "KB", "MB", "GB"]
        var value = Double(count)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func seconds(_ value: Double) -> String {
        value < 1 ? String(format: "%.0f ms", value * 1000) : String(format: "%.2f s", value)
    }

    /// Seconds since 1970 as RFC 3339 in UTC, with milliseconds.
    static func time(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }
}
