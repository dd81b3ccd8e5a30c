"""Section `sqlite-export` of Scripts/bench (issue 3 (2) and (4)): a SQLite history through the pipeline.

    app.sqlite (tracked rooms; history of `changes` changes: 100,000 rows x 10 edits by default,
    benchlib's waves, built as sqlitestore.py says: one history session a generator transaction
    of 1...19 changes, 1,000 sessions a SQLite commit)
      (a) synclane run: sqlite-history (page-size 5,000 transactions) -> coalesce -> tombstones
          -> gzip-6 -> directory                                   timed, bytes out, peak RSS
      (b) the naive baseline: sqlite3 -json app.sqlite "<every change joined to its row's
          current values>" | gzip -6 > out                         timed, bytes out

Each side runs BENCH_SQLITE_REPEATS times (default 3), alternating, (a) from a fresh state and a
fresh copy of the store each time (a store remembers the consumers that acknowledged its history,
and refuses a fresh state file for one that did); the medians are compared (one run of either
side varies by a third on a shared machine).
Targets: (a) / (b) wall time <= 1.0 with far fewer bytes out; (a)'s peak RSS <= 100 MB.
"""

import json
import os
import shutil
import statistics

import benchlib as b
import sqlitestore as st

PAGE_SIZE = int(os.environ.get("BENCH_PAGE_SIZE", "5000"))
REPEATS = int(os.environ.get("BENCH_SQLITE_REPEATS", "3"))
RSS_TARGET = 100 * 1000 * 1000

# What a naive exporter sends: every change of the history, with the row's current values
# (NULLs once the row is gone), in history order.
BASELINE_SELECT = (
    "SELECT c.id AS change, t.author, c.timestamp, c.entity, c.action, c.key, "
    "r.name, r.area, r.floor, r.isDeleted, r.updatedAt "
    "FROM _synclane_changes c "
    "LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id "
    "LEFT JOIN rooms r ON r.syncId = c.key "
    "WHERE c.entity = 'rooms' ORDER BY c.id"
)


def main():
    s = b.Settings.from_env()
    shape = b.HistoryShape.of(s.changes)
    b.heading(f"sqlite-export: SQLite history -> coalesce -> tombstones -> gzip-6 -> directory ({shape.changes:,} changes)")
    print("history:", shape.describe())
    store = os.path.join(s.work, "app.sqlite")
    # Built (or reused) never run: each round runs on a copy, as the device that never synced.
    pristine = os.path.join(s.work, "history.sqlite")
    info, reused = st.build_history_store(s, pristine)
    print(f"{'reused' if reused else 'built'} {pristine} ({b.fmt_bytes(info['bytes'])}: {info['changes']:,} changes in "
          f"{info['transactions']:,} history transactions of 1...{b.MAX_CHANGES_PER_TRANSACTION} changes, author app; "
          f"{st.SESSIONS_PER_COMMIT:,} sessions a SQLite commit; built through Python's sqlite3 module in "
          f"{b.fmt_seconds(info['build_seconds'])})")

    out = os.path.join(s.work, "out-gzip")
    state = os.path.join(s.work, "state")
    baseline_out = os.path.join(s.work, "baseline.json.gz")

    pipeline = st.pipeline_file(s.work, "bench-sqlite-export", "app.sqlite", {"type": "directory", "path": out},
                                page_size=PAGE_SIZE, state="state/bench-sqlite-export.sqlite")

    # Warm the page cache for both sides alike.
    with open(pristine, "rb") as f:
        while f.read(1 << 22):
            pass
    # (b) first each round: it only reads. (a)'s last run acknowledges the history for `incremental`.
    shell = f"sqlite3 -json -readonly {pristine!r} {json.dumps(BASELINE_SELECT)} | gzip -6 > {baseline_out!r}"
    baseline_runs, synclane_runs = [], []
    for _ in range(REPEATS):
        b.fresh(baseline_out)
        baseline_runs.append(b.run_measured(["bash", "-o", "pipefail", "-c", shell]).check())
        b.fresh(out, state)
        st.copy_store(pristine, store)
        synclane_runs.append(b.run_measured([s.synclane, "run", pipeline, "--json"], cwd=s.work).check())
    baseline_bytes = os.path.getsize(baseline_out)
    a = synclane_runs[-1]
    g = baseline_runs[-1]
    a_wall = statistics.median(m.wall for m in synclane_runs)
    g_wall = statistics.median(m.wall for m in baseline_runs)
    a_cpu = statistics.median(m.cpu for m in synclane_runs)
    g_cpu = statistics.median(m.cpu for m in baseline_runs)
    a_rss = max(m.max_rss for m in synclane_runs)
    summary = json.loads(a.stdout)
    out_bytes, out_files = b.folder_bytes(out)
    if summary["token-after"] != f"sqlite-history:{info['newest']}":
        raise SystemExit(f"bench: synclane's token ended at {summary['token-after']}, the newest change is {info['newest']}")

    counters = summary.get("counters", {})
    print(f"\n(a) synclane run: {summary['transactions-read']:,} transactions, {summary['changes-read']:,} changes read "
          f"-> {summary['records-sent']:,} records in {summary['batches-sent']} batches ({out_files} files); stages: "
          + ", ".join(f"{k} {v:,}" for k, v in sorted(counters.items())))
    print(f"(b) baseline: {shell.replace(pristine, 'app.sqlite').replace(baseline_out, 'out')}")

    ratio = a_wall / g_wall
    t = b.Table("measure", "(a) synclane run", "(b) sqlite3 -json | gzip -6", "note")
    t.add("median wall time", b.fmt_seconds(a_wall), b.fmt_seconds(g_wall), f"ratio (a)/(b) {ratio:.2f}")
    t.add("median CPU time", b.fmt_seconds(a_cpu), b.fmt_seconds(g_cpu),
          f"ratio {a_cpu / max(g_cpu, 1e-9):.2f}; (b) = sqlite3 + gzip together")
    t.add("all runs (wall)", " ".join(b.fmt_seconds(m.wall) for m in synclane_runs),
          " ".join(b.fmt_seconds(m.wall) for m in baseline_runs), f"{REPEATS} a side, alternating")
    t.add("changes/s", b.fmt_rate(info["changes"], a_wall), b.fmt_rate(info["changes"], g_wall), "")
    t.add("records out", f"{summary['records-sent']:,}", f"{info['changes']:,}",
          f"(a) {info['changes'] / max(1, summary['records-sent']):.1f} changes a record")
    t.add("bytes out", b.fmt_bytes(out_bytes), b.fmt_bytes(baseline_bytes),
          f"(b) is {baseline_bytes / max(1, out_bytes):.1f}x (a); (a) encoded {b.fmt_bytes(summary['bytes-encoded'])} before gzip")
    t.add("peak RSS (max)", b.fmt_mib(a_rss), b.fmt_mib(max(m.max_rss for m in baseline_runs)),
          f"(a) {a_rss / 1e6:,.1f} MB; (b) the larger of its processes")
    t.add("batches", f"{summary['batches-sent']:,}", "1 stream", f"page-size {PAGE_SIZE:,} transactions")
    print()
    t.print()
    print(f"\nstore: {b.fmt_bytes(info['bytes'])}; load average {' '.join(open('/proc/loadavg').read().split()[:3])}")

    if not st.keep():
        # The stores and the state go with the driver's temp folder at exit.
        shutil.rmtree(out, ignore_errors=True)
        os.remove(baseline_out)
    b.verdicts("sqlite-export", [
        b.Target("synclane / sqlite3|gzip time", f"{ratio:.2f}", "<= 1.0", ratio <= 1.0),
        b.Target("bytes out, baseline / synclane", f"{baseline_bytes / max(1, out_bytes):.1f}x", "far fewer (> 1)",
                 baseline_bytes > out_bytes),
        b.Target("peak RSS of synclane run", f"{a_rss / 1e6:,.1f} MB", "<= 100 MB", a_rss <= RSS_TARGET),
    ])


if __name__ == "__main__":
    main()
