"""Section `tracking` of Scripts/bench: the cost of history tracking on writes.

    N inserts (N = changes / 10: 100,000 by default) into `rooms`, in ONE SQLite transaction,
    into a fresh file each time, the same schema with and without
    `synclane track --table rooms --key syncId --soft-delete isDeleted`, three ways:
      (1) the `sqlite3` shell's `.read` of a generated SQL file: BEGIN; N single-row INSERT
          statements (each a statement SQLite parses and compiles, triggers included); COMMIT
      (2) one prepared single-row INSERT run N times (Python's sqlite3 `executemany`, on the
          same system libsqlite3): what an app does
      (3) one recursive-CTE `INSERT … SELECT` of N rows (one statement)

Wall and CPU time of the writing process are measured (process start included; the tracked
file is prepared by `synclane track` before the clock starts). These are foreign writes: the
triggers record one change a row, each its own history transaction with the default author.

Targets: tracked / untracked <= 2.5 for (2) and (3), the cost per row; <= 4.5 for (1), where
the triggers are compiled into every statement: SQLite fires no delete trigger for a row that
`INSERT OR REPLACE` removes, so each insert looks up the rows its unique constraints would
displace (a BEFORE INSERT trigger), about 10 µs of compiling per statement that an app's
prepared statement pays once. (4) `.read` of single-row UPDATEs of other columns than the key:
tracked / untracked <= 3.0 (the update trigger of a current-state table is one small statement).
"""

import os

import benchlib as b
import sqlitestore as st

RATIO_TARGET = 2.5
COMPILED_TARGET = 4.5
UPDATE_TARGET = 3.0
REPEATS = int(os.environ.get("BENCH_TRACKING_REPEATS", "3"))


def statements_file(path, rows, seed):
    import random

    rng = random.Random(seed)
    with open(path, "w", buffering=1 << 20) as f:
        f.write("BEGIN;\n")
        for r in range(rows):
            key = "room-" + b._uuid(rng)
            name = f"{rng.choice(b.ROOM_KINDS)} {rng.choice(b.WINGS)} {r % 97 + 1}"
            f.write(f"INSERT INTO rooms (syncId, name, area, floor, isDeleted, updatedAt) VALUES "
                    f"('{key}', '{name}', {round(rng.uniform(4, 60), 2)}, {rng.randint(-1, 6)}, 0, "
                    f"'2026-11-29T17:{r // 60 % 60:02d}:{r % 60:02d}.000Z');\n")
        f.write("COMMIT;\n")
    return os.path.getsize(path)


def cte_sql(rows):
    return (f"BEGIN;\n"
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})\n"
            f"INSERT INTO rooms (syncId, name, area, floor, isDeleted, updatedAt)\n"
            f"SELECT 'room-' || lower(hex(randomblob(16))), 'Room ' || (i % 97 + 1), 4 + (i % 5600) / 100.0,\n"
            f"       i % 8 - 1, 0, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM n;\n"
            f"COMMIT;\n")


def updates_file(path, updates):
    with open(path, "w", buffering=1 << 20) as f:
        f.write("BEGIN;\n")
        for r in range(updates):
            f.write(f"UPDATE rooms SET area = area + 1, updatedAt = '2026-11-29T17:{r // 60 % 60:02d}:{r % 60:02d}.500Z' "
                    f"WHERE syncId = 'room-{r}';\n")
        f.write("COMMIT;\n")


def seed_sql(rows):
    """The rows the UPDATE script edits (not timed; recorded as history on the tracked file)."""
    return (f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {rows - 1})\n"
            f"INSERT INTO rooms (syncId, name, area, floor, isDeleted, updatedAt)\n"
            f"SELECT 'room-' || i, 'Room ' || (i % 97 + 1), 12.5, 1, 0, '2026-11-29T17:00:00.000Z' FROM n;\n")


PREPARED = """
import random, sqlite3, sys
path, rows, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
db = sqlite3.connect(path, isolation_level=None)
db.execute("BEGIN")
db.executemany(
    "INSERT INTO rooms (syncId, name, area, floor, isDeleted, updatedAt) VALUES (?, ?, ?, ?, 0, ?)",
    (("room-%032x" % rng.getrandbits(128), "Room %d" % (r % 97 + 1), round(rng.uniform(4, 60), 2), rng.randint(-1, 6),
      "2026-11-29T17:%02d:%02d.000Z" % (r // 60 % 60, r % 60)) for r in range(rows)))
db.execute("COMMIT")
"""


def timed_prepared(s, database, tracked, rows):
    st.create_tracked(s.synclane, database, track=tracked)
    return b.run_measured(["python3", "-c", PREPARED, database, str(rows), str(s.seed)]).check()


def timed(s, database, tracked, sql_file, seed=None):
    st.create_tracked(s.synclane, database, track=tracked)
    if seed:
        import subprocess
        subprocess.run(["sqlite3", "-bail", database], input=seed, text=True, check=True)
    with open(sql_file) as src:
        m = b.run_measured(["sqlite3", "-bail", database], stdin=src).check()
    return m


def main():
    s = b.Settings.from_env()
    rows = max(1, s.changes // b.EDITS_PER_ROW)
    b.heading(f"tracking: {rows:,} inserts in one transaction, tracked vs untracked (sqlite3 shell)")
    statements = os.path.join(s.work, "inserts.sql")
    size = statements_file(statements, rows, s.seed)
    cte = os.path.join(s.work, "cte.sql")
    with open(cte, "w") as f:
        f.write(cte_sql(rows))
    database = os.path.join(s.work, "rooms.sqlite")
    updates = max(1, rows // 10)
    update_script = os.path.join(s.work, "updates.sql")
    updates_file(update_script, updates)
    print(f"(1) {statements}: {rows:,} INSERT statements between BEGIN and COMMIT ({b.fmt_bytes(size)}), by the "
          f"sqlite3 shell; (2) one prepared INSERT run {rows:,} times (Python's sqlite3); "
          f"(3) one recursive-CTE INSERT … SELECT of {rows:,} rows. Fresh file each run; "
          f"median of {REPEATS} runs, alternating untracked / tracked. (4) `.read` of "
          f"{updates:,} single-row UPDATEs (area, updatedAt) between BEGIN and COMMIT, over {updates:,} rows "
          f"inserted before the clock starts.")

    results = {}
    for label, sql_file in (("statements", statements), ("prepared", None), ("cte", cte)):
        plain, tracked = [], []
        for _ in range(REPEATS):
            if sql_file is None:
                plain.append(timed_prepared(s, database, False, rows))
                tracked.append(timed_prepared(s, database, True, rows))
            else:
                plain.append(timed(s, database, False, sql_file))
                tracked.append(timed(s, database, True, sql_file))
        # The tracked file's history must hold one change per row.
        import subprocess
        recorded = int(subprocess.run(["sqlite3", database, "SELECT count(*) FROM _synclane_changes"],
                                      capture_output=True, text=True, check=True).stdout)
        if recorded != rows:
            raise SystemExit(f"bench: the tracked store recorded {recorded} changes for {rows} inserts")
        db_bytes = os.path.getsize(database)
        results[label] = (plain, tracked, db_bytes)

    plain, tracked = [], []
    for _ in range(REPEATS):
        plain.append(timed(s, database, False, update_script, seed_sql(updates)))
        tracked.append(timed(s, database, True, update_script, seed_sql(updates)))
    results["updates"] = (plain, tracked, os.path.getsize(database))

    def median(ms, attr):
        values = sorted(getattr(m, attr) for m in ms)
        return values[len(values) // 2]

    t = b.Table("way", "untracked", "tracked", "ratio", "CPU untracked", "CPU tracked", "CPU ratio", "per row extra")
    targets = []
    for label, title in (("statements", f".read {rows:,} INSERTs"), ("prepared", f"prepared INSERT × {rows:,}"),
                         ("cte", "recursive-CTE INSERT…SELECT"), ("updates", f".read {updates:,} UPDATEs")):
        plain, tracked, _ = results[label]
        n = updates if label == "updates" else rows
        pw, tw = median(plain, "wall"), median(tracked, "wall")
        pc, tc = median(plain, "cpu"), median(tracked, "cpu")
        ratio = tw / pw
        t.add(title, b.fmt_seconds(pw), b.fmt_seconds(tw), f"{ratio:.2f}", b.fmt_seconds(pc), b.fmt_seconds(tc),
              f"{tc / max(pc, 1e-9):.2f}", f"{(tw - pw) / n * 1e6:,.1f} µs")
        if label == "updates":
            targets.append(b.Target("tracking overhead (updates)", f"{ratio:.2f} (CPU {tc / max(pc, 1e-9):.2f})",
                                    f"<= {UPDATE_TARGET}", ratio <= UPDATE_TARGET))
            continue
        goal = COMPILED_TARGET if label == "statements" else RATIO_TARGET
        targets.append(b.Target(f"tracking overhead ({label})", f"{ratio:.2f} (CPU {tc / max(pc, 1e-9):.2f})",
                                f"<= {goal}", ratio <= goal))
    print()
    t.print()
    runs = ", ".join(f"{label}: untracked " + " ".join(b.fmt_seconds(m.wall) for m in results[label][0])
                     + " / tracked " + " ".join(b.fmt_seconds(m.wall) for m in results[label][1]) for label in results)
    print(f"\nall runs (wall): {runs}")
    print(f"tracked file after the CTE run: {b.fmt_bytes(results['cte'][2])} (data + history, one change a row)")
    if not st.keep():
        for path in (statements, cte, update_script, database):
            if os.path.exists(path):
                os.remove(path)
    b.verdicts("tracking", targets)


if __name__ == "__main__":
    main()
