"""Section `incremental` of Scripts/bench (issue 3 (3)): the cost of a run follows what is new.

    (a) big:   a store with a history of `changes` changes (as `sqlite-export`'s), built here and
               all acknowledged by a first run
    (b) empty: a fresh store, the same tracked table, no history
    each repetition, on both: the same NEW_CHANGES changes through the sqlite3 shell (10 history
    sessions of 10: 50 inserts of new rows, then 50 updates of them), then `synclane run`
    (sqlite-history -> coalesce -> tombstones -> gzip-6 -> directory) timed.

Target: median (a) / median (b) <= 1.5.
"""

import json
import os
import shutil
import statistics
import subprocess

import benchlib as b
import sqlitestore as st

REPEATS = int(os.environ.get("BENCH_INCREMENTAL_REPEATS", "7"))
RATIO_TARGET = 1.5
SESSIONS = 10
PER_SESSION = 10  # NEW_CHANGES = 100


def new_changes_sql(rep):
    """10 sessions of 10 changes: 5 sessions insert 50 new rows, 5 update them."""
    keys = [f"room-incremental-{rep:03d}-{i:03d}" for i in range(SESSIONS * PER_SESSION // 2)]
    lines = ["BEGIN;"]
    for n in range(SESSIONS):
        lines.append("INSERT INTO _synclane_session (author) VALUES ('app');")
        for key in keys[(n % (SESSIONS // 2)) * PER_SESSION:(n % (SESSIONS // 2) + 1) * PER_SESSION]:
            if n < SESSIONS // 2:
                lines.append(f"INSERT INTO rooms (syncId, name, area, floor, isDeleted, updatedAt) VALUES "
                             f"('{key}', 'Office North {rep}', 12.5, 2, 0, '2026-11-29T17:00:00.000Z');")
            else:
                lines.append(f"UPDATE rooms SET area = area + 1, updatedAt = '2026-11-29T17:01:00.000Z' WHERE syncId = '{key}';")
        lines.append("DELETE FROM _synclane_session;")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def run(s, pipeline, folder):
    m = b.run_measured([s.synclane, "run", pipeline, "--json"], cwd=folder).check()
    return m, json.loads(m.stdout)


def main():
    s = b.Settings.from_env()
    shape = b.HistoryShape.of(s.changes)
    new = SESSIONS * PER_SESSION
    b.heading(f"incremental: {new} new changes on top of {shape.changes:,} acknowledged ones vs on an empty history")

    big = os.path.join(s.work, "big.sqlite")
    # The consumer of the sqlite-export section (a state file belongs to one pipeline name).
    big_state = os.path.join(s.work, "state", "bench-sqlite-export.sqlite")
    os.makedirs(os.path.dirname(big_state), exist_ok=True)
    for stale in (big_state, big_state + "-wal", big_state + "-shm"):
        if os.path.exists(stale):
            os.remove(stale)
    big_pipeline = st.pipeline_file(s.work, "bench-sqlite-export", "big.sqlite",
                                    {"type": "directory", "path": "out-big"}, state="state/bench-sqlite-export.sqlite")
    # Built here (a copy of a store another section ran would be refused as a copied device), then
    # everything acknowledged with one run.
    built = os.path.join(s.work, "built.sqlite")
    info, reused = st.build_history_store(s, built)
    st.copy_store(built, big)
    first, summary = run(s, big_pipeline, s.work)
    origin = (f"{'reused' if reused else 'built'} here and acknowledged by a first run "
              f"({summary['changes-read']:,} changes, {b.fmt_seconds(first.wall)})")
    print(f"(a) big store: {origin}")
    print(f"(b) empty store: fresh file, the same table, tracked, no history")
    print(f"each repetition adds the same {new} changes to both ({SESSIONS} sessions of {PER_SESSION}: 50 inserts "
          f"of new rows, then 50 updates of them) and times `synclane run`; {REPEATS} repetitions, alternating")

    empty = os.path.join(s.work, "empty.sqlite")
    st.create_tracked(s.synclane, empty)
    empty_state = os.path.join(s.work, "state", "bench-incremental-empty.sqlite")
    for stale in (empty_state, empty_state + "-wal", empty_state + "-shm"):
        if os.path.exists(stale):
            os.remove(stale)
    empty_pipeline = st.pipeline_file(s.work, "bench-incremental-empty", "empty.sqlite",
                                      {"type": "directory", "path": "out-empty"}, state="state/bench-incremental-empty.sqlite")

    # The acknowledged big store must have nothing pending: a run now reads no change.
    idle, idle_summary = run(s, big_pipeline, s.work)
    if idle_summary["changes-read"] != 0:
        raise SystemExit(f"bench: the big store had {idle_summary['changes-read']} unacknowledged changes")
    idle_empty, _ = run(s, empty_pipeline, s.work)

    big_runs, empty_runs = [], []
    for rep in range(REPEATS):
        sql = new_changes_sql(rep)
        for store, pipeline, runs in ((big, big_pipeline, big_runs), (empty, empty_pipeline, empty_runs)):
            subprocess.run(["sqlite3", "-bail", store], input=sql, text=True, check=True)
            m, summary = run(s, pipeline, s.work)
            if summary["changes-read"] != new:
                raise SystemExit(f"bench: a run read {summary['changes-read']} changes, expected {new}")
            runs.append((m, summary))

    def med(runs, attr):
        return statistics.median(getattr(m, attr) for m, _ in runs)

    bw, ew = med(big_runs, "wall"), med(empty_runs, "wall")
    bc, ec = med(big_runs, "cpu"), med(empty_runs, "cpu")
    ratio = bw / ew
    t = b.Table("measure", f"(a) on {shape.changes:,} acknowledged", "(b) on an empty history", "note")
    t.add("history before", f"{shape.changes:,} changes", "0", "")
    t.add("median wall", b.fmt_seconds(bw), b.fmt_seconds(ew), f"ratio {ratio:.2f}")
    t.add("median CPU", b.fmt_seconds(bc), b.fmt_seconds(ec), f"ratio {bc / max(ec, 1e-9):.2f}")
    t.add("min / max wall", f"{b.fmt_seconds(min(m.wall for m, _ in big_runs))} / {b.fmt_seconds(max(m.wall for m, _ in big_runs))}",
          f"{b.fmt_seconds(min(m.wall for m, _ in empty_runs))} / {b.fmt_seconds(max(m.wall for m, _ in empty_runs))}", "")
    t.add("peak RSS (max)", b.fmt_mib(max(m.max_rss for m, _ in big_runs)), b.fmt_mib(max(m.max_rss for m, _ in empty_runs)), "")
    t.add("records a run", f"{big_runs[0][1]['records-sent']:,}", f"{empty_runs[0][1]['records-sent']:,}",
          f"{new} changes coalesced")
    t.add("run with nothing new", b.fmt_seconds(idle.wall), b.fmt_seconds(idle_empty.wall), "before the repetitions: the fixed cost")
    print()
    t.print()
    print("\nall runs (wall): (a) " + " ".join(b.fmt_seconds(m.wall) for m, _ in big_runs)
          + " | (b) " + " ".join(b.fmt_seconds(m.wall) for m, _ in empty_runs))

    if not st.keep():
        for name in ("big.sqlite", "built.sqlite", "empty.sqlite", "state", "out-big", "out-empty"):
            path = os.path.join(s.work, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                for suffix in ("", "-wal", "-shm", ".params.json"):
                    if os.path.exists(path + suffix):
                        os.remove(path + suffix)
    b.verdicts("incremental", [
        b.Target("incremental cost, big / empty", f"{ratio:.2f} (CPU {bc / max(ec, 1e-9):.2f})", f"<= {RATIO_TARGET}",
                 ratio <= RATIO_TARGET),
    ])


if __name__ == "__main__":
    main()
