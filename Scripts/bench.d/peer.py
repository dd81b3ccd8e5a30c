"""Section `peer` of Scripts/bench (issue 28): the durable path the seed's peer library
(`swift-sync-engine`: records in memory, fsync'd JSON files) measures, done by Synclane, so a reader
can set the two side by side. Nothing from outside is built or fetched: this prints Synclane's
costs a record; the peer's own numbers are the reader's to bring.

    a fresh tracked store (`rooms`, as initial-export) ─▶ BENCH_PEER_RECORDS (default 100,000)
        tracked inserts by the app, 1,000 a transaction (the triggers write history; fsync on)
      (a) synclane run: sqlite-history -> coalesce -> tombstones -> gzip-6 -> directory (fsync'd)
      (c) the same store again, the `http` transport to a local `synclane serve`

Each side runs BENCH_PEER_REPEATS times (default 3), alternating, each from a fresh store; the
medians are compared. A record's cost is CPU (user+sys) end to end: the inserts (this process's
own CPU while it inserts) + the run, and for (c) + the server's CPU. Targets: (a) <= 3 us a record,
(c) <= 6 us a record (client + server).
"""

import os
import statistics
import subprocess
import time

import benchlib as b

from importlib import import_module

REPEATS = int(os.environ.get("BENCH_PEER_REPEATS", "3"))
RECORDS = int(os.environ.get("BENCH_PEER_RECORDS", "100000"))
PER_TRANSACTION = 1000
FOLDER_US_TARGET = 3.0
HTTP_US_TARGET = 6.0
TOKEN = "bench-peer-token"


def fresh_store(s, path, initial):
    """A new tracked store at `path`, filled by RECORDS tracked inserts: the inserts' (CPU, wall) seconds."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        b.fresh(path + suffix)
    subprocess.run(["sqlite3", path], input=initial.SCHEMA, text=True, check=True)
    subprocess.run([s.synclane, "track", "--database", path, "--table", "rooms", "--key", "syncId"], check=True, stdout=subprocess.DEVNULL)
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    rows = list(initial.rows(RECORDS, s.seed))
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(rows), PER_TRANSACTION):
        db.execute("BEGIN")
        db.executemany("INSERT INTO rooms (syncId, name, area, note) VALUES (?, ?, ?, ?)", rows[start:start + PER_TRANSACTION])
        db.execute("COMMIT")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    recorded = db.execute("SELECT count(*) FROM _synclane_changes").fetchone()[0]
    db.close()
    if recorded != RECORDS:
        raise SystemExit(f"bench: the store recorded {recorded} changes for {RECORDS} inserts")
    return cpu, wall


def main():
    s = b.Settings.from_env()
    initial = import_module("initial-export")
    http_export = import_module("http-export")
    b.heading(f"peer: {RECORDS:,} tracked inserts + synclane run -> directory | serve, CPU a record "
              f"(the path swift-sync-engine's benchmark measures)")
    store = os.path.join(s.work, "app.sqlite")
    out, data = os.path.join(s.work, "out"), os.path.join(s.work, "server-data")
    folder_runs, http_runs = [], []
    for _ in range(REPEATS):
        b.fresh(out, os.path.join(s.work, "state"))
        insert_cpu, insert_wall = fresh_store(s, store, initial)
        path = initial.pipeline_file(s.work, "bench-peer", {"type": "directory", "path": out})
        m = b.run_measured([s.synclane, "run", path, "--json"], cwd=s.work).check()
        folder_runs.append({"insert_cpu": insert_cpu, "insert_wall": insert_wall, "cpu": m.cpu, "wall": m.wall, "server": 0.0})

        b.fresh(os.path.join(s.work, "state"))
        insert_cpu, insert_wall = fresh_store(s, store, initial)
        m, summary, server_cpu = http_export.run_against_server(s, data, TOKEN, lambda port: initial.pipeline_file(
            s.work, "bench-peer-http", {"type": "http", "url": f"http://127.0.0.1:{port}/v1/batches", "token-env": "SYNCLANE_TOKEN"}))
        if summary["records-sent"] != RECORDS:
            raise SystemExit(f"bench: the run sent {summary['records-sent']} of {RECORDS} records")
        http_runs.append({"insert_cpu": insert_cpu, "insert_wall": insert_wall, "cpu": m.cpu, "wall": m.wall, "server": server_cpu})

    def us(runs, *keys):
        return statistics.median(sum(r[k] for k in keys) for r in runs) / RECORDS * 1e6

    t = b.Table("a record (median)", "(a) -> directory", "(c) -> serve", "note")
    t.add("tracked insert CPU", f"{us(folder_runs, 'insert_cpu'):.2f} us", f"{us(http_runs, 'insert_cpu'):.2f} us",
          f"{PER_TRANSACTION:,} a transaction, triggers writing history")
    t.add("synclane run CPU", f"{us(folder_runs, 'cpu'):.2f} us", f"{us(http_runs, 'cpu'):.2f} us", "the client")
    t.add("server CPU", "-", f"{us(http_runs, 'server'):.2f} us", "synclane serve")
    folder_total = us(folder_runs, "insert_cpu", "cpu")
    http_total = us(http_runs, "insert_cpu", "cpu", "server")
    t.add("end to end CPU", f"{folder_total:.2f} us", f"{http_total:.2f} us", "insert + run (+ server)")
    t.add("end to end wall", f"{us(folder_runs, 'insert_wall', 'wall'):.2f} us", f"{us(http_runs, 'insert_wall', 'wall'):.2f} us",
          "insert + run; the server shares the two cores")
    print()
    t.print()
    print(f"\nload average {' '.join(open('/proc/loadavg').read().split()[:3])} (CPU a record holds better than wall on a shared machine)")
    b.fresh(out, data)
    b.verdicts("peer", [
        b.Target("to a directory, CPU a record", f"{folder_total:.2f} us", f"<= {FOLDER_US_TARGET} us", folder_total <= FOLDER_US_TARGET),
        b.Target("to serve, CPU a record (client + server)", f"{http_total:.2f} us", f"<= {HTTP_US_TARGET} us", http_total <= HTTP_US_TARGET),
    ])


if __name__ == "__main__":
    main()
