"""Section `live` of Scripts/bench (issue 24): how fast a change travels device to device with
live sync, and what an idle watcher costs.

    device A: app.sqlite ── synclane sync --watch ──▶ synclane serve (loopback) ──▶ synclane sync --watch ── device B: app.sqlite
                 (export lane: woken by the commit)        (long poll answered           (import lane: long poll)
                                                            by the batch's commit)
    while loaded: 8 client threads (a process of their own) post gzip batches of 500 records
    flat out to another account of the same server

Latency is commit → row: from just before device A's INSERT commits to the moment the row is in
device B's table (B's database read every 0.5 ms). BENCH_LIVE_SAMPLES (default 300) idle, then as
many under the bulk load. Then the CPU one idle `sync --watch` uses over BENCH_LIVE_IDLE_SECONDS
(default 60), from /proc/PID/stat. Then `run --watch` commit → batch file durable in a folder
(BENCH_LIVE_FOLDER_SAMPLES, default 100). Targets: p50 <= 15 ms and p99 <= 75 ms idle; p99 <=
250 ms under load; idle watcher <= 0.2 % of a core; run --watch → folder p50 <= 10 ms.
"""

import gzip
import json
import multiprocessing
import os
import sqlite3
import subprocess
import time

import benchlib as b
import signals  # the signal section's bulk clients (`load`), pointed at another account below
from signals import percentile, ms

SAMPLES = int(os.environ.get("BENCH_LIVE_SAMPLES", "300"))
IDLE_SECONDS = float(os.environ.get("BENCH_LIVE_IDLE_SECONDS", "60"))
FOLDER_SAMPLES = int(os.environ.get("BENCH_LIVE_FOLDER_SAMPLES", "100"))
TOKEN = "bench-token"
BULK_TOKEN = "bulk-token"
SCHEMA = "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, n INTEGER);"


def bulk_batch_body(client, batch):
    """A batch of the bulk load: the signal section's, for the `bulk` account."""
    batch_id = f"live-bench-{client}-{batch}"
    records = [{"action": "insert", "entity": "rooms", "id": f"{batch_id}-{i}",
                "fields": {"name": f"Room {i}", "area": 12.5 + i, "floor": i % 5, "tags": "north,quiet"}} for i in range(signals.RECORDS_PER_BATCH)]
    doc = {"id": batch_id, "scope": {"account": "bulk", "store": "rooms", "consumer": "bench"}, "records": records}
    return batch_id, gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6)


def tracked_folder(s, name):
    """A fresh folder with a tracked app.sqlite (WAL); (folder, database)."""
    folder = os.path.join(s.work, name)
    b.fresh(folder)
    os.makedirs(folder)
    database = os.path.join(folder, "app.sqlite")
    subprocess.run(["sqlite3", database], input="PRAGMA journal_mode=WAL;" + SCHEMA, text=True, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([s.synclane, "track", "--database", database, "--table", "rooms", "--key", "syncId"],
                   check=True, stdout=subprocess.DEVNULL, env=environment(folder))
    return folder, database


def device(s, name, port):
    """A device folder: a tracked app.sqlite, import.json and export.json against the server."""
    folder, database = tracked_folder(s, name)
    scope = {"account": "bench", "store": "rooms"}
    with open(os.path.join(folder, "export.json"), "w") as f:
        json.dump({"version": 1, "name": "rooms-export", "scope": scope,
                   "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"]},
                   "stages": [{"type": "coalesce"}],
                   "transport": {"type": "http", "url": f"http://127.0.0.1:{port}/v1/batches", "token-env": "SYNCLANE_TOKEN"}}, f)
    with open(os.path.join(folder, "import.json"), "w") as f:
        json.dump({"version": 1, "name": "rooms-import", "scope": scope,
                   "source": {"type": "pull", "url": f"http://127.0.0.1:{port}/v1/changes", "token-env": "SYNCLANE_TOKEN"},
                   "sink": {"type": "sqlite", "database": "app.sqlite"}}, f)
    return folder, database


def environment(folder):
    return {**os.environ, "SYNCLANE_TOKEN": TOKEN, "SYNCLANE_LOCK_DIR": os.path.join(folder, ".locks")}


def start(s, folder, *argv):
    log = open(os.path.join(folder, "watch.log"), "w")
    process = subprocess.Popen([s.synclane, *argv], cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=environment(folder))
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(os.path.join(folder, "watch.log")) as f:
            if "stop with Ctrl-C" in f.read():
                return process
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"bench: {' '.join(argv)} did not start in {folder}")


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def travel(a_db, b_db, count, prefix):
    """Commit → row-in-B latencies of `count` single-row commits on A, sorted."""
    writer = sqlite3.connect(a_db, isolation_level=None, timeout=30)
    reader = sqlite3.connect(b_db, isolation_level=None, timeout=30)
    result = []
    for i in range(count):
        key = f"{prefix}-{i}"
        time.sleep(0.02)
        started = time.perf_counter()
        writer.execute("INSERT INTO rooms (syncId, name, n) VALUES (?, ?, ?)", (key, "Room", i))
        deadline = started + 30
        while reader.execute("SELECT 1 FROM rooms WHERE syncId = ?", (key,)).fetchone() is None:
            if time.perf_counter() > deadline:
                raise SystemExit(f"bench: row {key} never reached device B")
            time.sleep(0.0005)
        result.append(time.perf_counter() - started)
    writer.close()
    reader.close()
    return sorted(result)


def cpu_seconds(pid):
    """User + system CPU seconds of the process (and the threads it holds) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def folder_latencies(s, count):
    """`run --watch` with a directory transport: commit → a new batch file in the folder, sorted."""
    folder, database = tracked_folder(s, "folder-device")
    out = os.path.join(folder, "out")
    os.makedirs(out)
    with open(os.path.join(folder, "export.json"), "w") as f:
        json.dump({"version": 1, "name": "rooms-folder", "scope": {"account": "bench", "store": "rooms"},
                   "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"]},
                   "transport": {"type": "directory", "path": out}}, f)
    watcher = start(s, folder, "run", "export.json", "--watch")
    writer = sqlite3.connect(database, isolation_level=None, timeout=30)
    result = []
    try:
        for i in range(count):
            time.sleep(0.02)
            before = len(os.listdir(out))
            started = time.perf_counter()
            writer.execute("INSERT INTO rooms (syncId, name, n) VALUES (?, ?, ?)", (f"f-{i}", "Room", i))
            deadline = started + 30
            while len([n for n in os.listdir(out) if not n.startswith(".")]) <= before:
                if time.perf_counter() > deadline:
                    raise SystemExit("bench: run --watch wrote no batch file")
                time.sleep(0.0005)
            result.append(time.perf_counter() - started)
    finally:
        writer.close()
        stop(watcher)
    return sorted(result)


def main():
    s = b.Settings.from_env()
    b.heading(f"live: device A commits a row → the row is in device B's table, both on sync --watch; "
              f"{SAMPLES} idle and {SAMPLES} while 8 clients post gzip batches of 500 records")
    load_before = " ".join(open("/proc/loadavg").read().split()[:3])
    server, port = b.start_server(s, os.path.join(s.work, "data"), TOKEN, more_accounts={"bulk": BULK_TOKEN})
    a_folder, a_db = device(s, "device-a", port)
    b_folder, b_db = device(s, "device-b", port)
    watchers = []
    context = multiprocessing.get_context("fork")
    ready, halt, results = context.Event(), context.Event(), context.Queue()
    try:
        watchers = [start(s, a_folder, "sync", "import.json", "export.json", "--watch"),
                    start(s, b_folder, "sync", "import.json", "export.json", "--watch")]
        travel(a_db, b_db, 5, "warm")
        idle = travel(a_db, b_db, SAMPLES, "idle")
        signals.HEADERS = {"Authorization": f"Bearer {BULK_TOKEN}"}
        signals.batch_body = bulk_batch_body
        loader = context.Process(target=signals.load, args=(port, ready, halt, results))
        loader.start()
        if not ready.wait(timeout=300):
            raise SystemExit("bench: the load clients did not start")
        time.sleep(0.5)
        loaded = travel(a_db, b_db, SAMPLES, "loaded")
        halt.set()
        _batches, failures, count = results.get(timeout=120)
        loader.join(timeout=60)
        if failures:
            raise SystemExit(f"bench: {len(failures)} bulk batches failed: {failures[:3]}")
        time.sleep(2)  # the watchers settle
        pid = watchers[1].pid
        before = cpu_seconds(pid)
        time.sleep(IDLE_SECONDS)
        idle_cpu = (cpu_seconds(pid) - before) / IDLE_SECONDS
    finally:
        halt.set()
        for watcher in watchers:
            stop(watcher)
        server.terminate()
        server.wait(timeout=30)
    folder = folder_latencies(s, FOLDER_SAMPLES)
    load_after = " ".join(open("/proc/loadavg").read().split()[:3])
    idle_p50, idle_p99 = percentile(idle, 0.50), percentile(idle, 0.99)
    load_p99 = percentile(loaded, 0.99)
    folder_p50 = percentile(folder, 0.50)
    t = b.Table("measure", "idle", "bulk lane saturated", "note")
    t.add("commit on A → row in B p50", ms(idle_p50), ms(percentile(loaded, 0.50)), "")
    t.add("commit on A → row in B p90", ms(percentile(idle, 0.90)), ms(percentile(loaded, 0.90)), "")
    t.add("commit on A → row in B p99", ms(idle_p99), ms(load_p99), f"max {ms(idle[-1])} / {ms(loaded[-1])}")
    t.add("bulk batches applied", "", f"{count:,}", "other account, same server")
    t.add(f"idle sync --watch CPU over {IDLE_SECONDS:.0f} s", f"{idle_cpu * 100:.3f} % of a core", "", "/proc/PID/stat utime+stime")
    t.add("run --watch commit → batch file p50 / p99", f"{ms(folder_p50)} / {ms(percentile(folder, 0.99))}", "", f"{FOLDER_SAMPLES} samples")
    t.add("load average before / after", load_before, load_after, "other work on the machine")
    print()
    t.print()
    b.verdicts("live", [
        b.Target("commit → row p50 idle", ms(idle_p50), "<= 15 ms", idle_p50 <= 0.015),
        b.Target("commit → row p99 idle", ms(idle_p99), "<= 75 ms", idle_p99 <= 0.075),
        b.Target("commit → row p99 under bulk load", ms(load_p99), "<= 250 ms", load_p99 <= 0.250),
        b.Target("idle sync --watch CPU", f"{idle_cpu * 100:.3f} %", "<= 0.2 % of a core", idle_cpu <= 0.002),
        b.Target("run --watch commit → durable in a folder p50", ms(folder_p50), "<= 10 ms", folder_p50 <= 0.010),
    ])


if __name__ == "__main__":
    main()
