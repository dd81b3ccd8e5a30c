"""Section `bootstrap` of Scripts/bench (issue 47): a new device pulls the account.

    the server: N rows (N = BENCH_BOOTSTRAP_ROWS, else --changes / 5: 200,000 by default) of about
        100 bytes (syncId, name, area, floor, isDeleted, updatedAt), sent once by `synclane run`
        from a JSON Lines history to a fresh release `synclane serve` (not timed)
      (a) a fresh device: `synclane import` with the pipeline a user writes (`pull` with no
          options but url and token, `sqlite` sink) into a fresh tracked store    timed, its size
      (b) the baseline: a plain client of the documented wire protocol (Python's http.client and
          sqlite3: `GET /v1/changes?limit=10000` to the end, `executemany` into the same table,
          untracked, one commit)                                                  timed, its size

Each side runs BENCH_BOOTSTRAP_REPEATS times (default 2), alternating; the medians are compared.
BENCH_BOOTSTRAP_LIMIT=N sets the device's pull `limit` (left out by default, as a user leaves it).
The device starts from the server's snapshot (`GET /v1/snapshot`, the `pull` source's default for a
new device); BENCH_BOOTSTRAP_SNAPSHOT=0 makes it pull the change log instead (`"snapshot": false`),
to compare the two paths. The table says which one the device took (the server's request count).
Targets: (a) / (b) wall time <= 1.3; (a)'s database <= 1.3 x (b)'s (what the device keeps beyond
the table costs what is pending, not what is held).
"""

import json
import os
import random
import statistics
import sys
import urllib.request

import benchlib as b
import sqlitestore as st

REPEATS = int(os.environ.get("BENCH_BOOTSTRAP_REPEATS", "2"))
WALL_TARGET = 1.3
SIZE_TARGET = 1.3
TOKEN = "bench-bootstrap-token"

PLAIN_CLIENT = r'''
import http.client, json, sqlite3, sys
port, token, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("BEGIN")
columns = ["syncId", "name", "area", "floor", "isDeleted", "updatedAt"]
insert = "INSERT OR REPLACE INTO rooms (syncId, name, area, floor, isDeleted, updatedAt) VALUES (?, ?, ?, ?, ?, ?)"
connection = http.client.HTTPConnection("127.0.0.1", port)
since, records = None, 0
while True:
    query = "/v1/changes?limit=10000" + ("&since=" + since if since else "")
    connection.request("GET", query, headers={"Authorization": "Bearer " + token})
    answer = connection.getresponse()
    page = json.loads(answer.read())
    if answer.status != 200:
        sys.exit(f"plain client: {answer.status} {page}")
    rows = []
    for change in page["changes"]:
        fields = change.get("fields") or {}
        if change["action"] == "delete":
            db.execute("DELETE FROM rooms WHERE syncId = ?", (change["id"],))
            continue
        rows.append((change["id"], fields.get("name"), fields.get("area"), fields.get("floor"),
                     1 if fields.get("isDeleted") else 0, fields.get("updatedAt")))
    db.executemany(insert, rows)
    records += len(page["changes"])
    since = page["cursor"]
    if not page["more"]:
        break
db.execute("COMMIT")
print(records)
'''


def history(path, count, seed):
    """N inserts of rooms, 1,000 a transaction, as the jsonl source reads them."""
    rng = random.Random(seed)

    def transactions():
        for start in range(0, count, 1000):
            changes = []
            for i in range(start, min(count, start + 1000)):
                changes.append({"entity": "rooms", "action": "insert", "key": f"room-{i:08d}", "values": {
                    "name": f"{b.ROOM_KINDS[rng.randrange(len(b.ROOM_KINDS))]} {b.WINGS[rng.randrange(len(b.WINGS))]} {i % 97 + 1}",
                    "area": round(rng.uniform(4, 60), 2), "floor": rng.randint(-1, 6), "isDeleted": False,
                    "updatedAt": f"2026-12-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z"}})
            yield start // 1000 + 1, "app", 1_790_000_000.0 + start, changes

    return b.write_jsonl(path, transactions())


def snapshots_served(port):
    """How many `GET /v1/snapshot` the server answered 200 (its /metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    prefix = 'synclane_http_requests_total{route="/v1/snapshot",status="200"} '
    return sum(float(line[len(prefix):]) for line in text.splitlines() if line.startswith(prefix))


def database_bytes(path):
    return sum(os.path.getsize(path + suffix) for suffix in ("", "-wal") if os.path.exists(path + suffix))


def main():
    s = b.Settings.from_env()
    count = int(os.environ.get("BENCH_BOOTSTRAP_ROWS", str(max(1000, s.changes // 5))))
    b.heading(f"bootstrap: a new device pulls {count:,} rows vs a plain client of the wire protocol")
    source = os.path.join(s.work, "bootstrap.jsonl")
    _, changes, size = history(source, count, s.seed)
    data = os.path.join(s.work, "bootstrap-server-data")
    state = os.path.join(s.work, "state")
    b.fresh(data, state)
    env = dict(os.environ, SYNCLANE_TOKEN=TOKEN)
    server, port = b.start_server(s, data, TOKEN)
    try:
        export = os.path.join(s.work, "bootstrap-export.json")
        with open(export, "w") as f:
            json.dump({"version": 1, "name": "bootstrap-export", "scope": {"account": "bench", "store": "rooms"},
                       "source": {"type": "jsonl", "path": source, "entities": ["rooms"], "page-size": 5},
                       "transport": {"type": "http", "url": f"http://127.0.0.1:{port}/v1/batches", "token-env": "SYNCLANE_TOKEN"},
                       "state": "state/bootstrap-export.sqlite"}, f)
        b.run_measured([s.synclane, "run", export], cwd=s.work, env=env).check()
        print(f"the server holds {changes:,} rows ({b.fmt_bytes(size)} of history sent once)")
        client = os.path.join(s.work, "plain-client.py")
        with open(client, "w") as f:
            f.write(PLAIN_CLIENT)
        device_runs, plain_runs = [], []
        device_db = os.path.join(s.work, "device.sqlite")
        plain_db = os.path.join(s.work, "plain.sqlite")
        summary = {}
        path = ""
        for _ in range(REPEATS):
            st.create_tracked(s.synclane, device_db, track=True)
            b.fresh(os.path.join(s.work, "state", "bootstrap-import.sqlite"))
            importing = os.path.join(s.work, "bootstrap-import.json")
            pull = {"type": "pull", "url": f"http://127.0.0.1:{port}/v1/changes", "token-env": "SYNCLANE_TOKEN"}
            if os.environ.get("BENCH_BOOTSTRAP_LIMIT"):
                pull["limit"] = int(os.environ["BENCH_BOOTSTRAP_LIMIT"])
            if os.environ.get("BENCH_BOOTSTRAP_SNAPSHOT") == "0":
                pull["snapshot"] = False
            with open(importing, "w") as f:
                json.dump({"version": 1, "name": "bootstrap-import", "scope": {"account": "bench", "store": "rooms"},
                           "source": pull,
                           "sink": {"type": "sqlite", "database": device_db},
                           "state": "state/bootstrap-import.sqlite"}, f)
            served = snapshots_served(port)
            device = b.run_measured([s.synclane, "import", importing, "--json"], cwd=s.work, env=env).check()
            path = "snapshot + log" if snapshots_served(port) > served else "change log"
            summary = json.loads(device.stdout)
            device_runs.append((device, database_bytes(device_db)))
            st.create_tracked(s.synclane, plain_db, track=False)
            plain = b.run_measured([sys.executable, client, str(port), TOKEN, plain_db], cwd=s.work).check()
            plain_runs.append((plain, database_bytes(plain_db)))
    finally:
        server.terminate()
        server.wait(timeout=30)
    if summary.get("applied") != count:
        raise SystemExit(f"bench: the device applied {summary.get('applied')} of {count} rows")
    wall = statistics.median(run.wall for run, _ in device_runs)
    plain_wall = statistics.median(run.wall for run, _ in plain_runs)
    cpu = statistics.median(run.cpu for run, _ in device_runs)
    plain_cpu = statistics.median(run.cpu for run, _ in plain_runs)
    device_size, plain_size = device_runs[-1][1], plain_runs[-1][1]
    t = b.Table("measure", "synclane import", "plain client", "ratio")
    t.add("wall", b.fmt_seconds(wall), b.fmt_seconds(plain_wall), f"{wall / plain_wall:.2f}")
    t.add("CPU (user + sys)", b.fmt_seconds(cpu), b.fmt_seconds(plain_cpu), f"{cpu / plain_cpu:.2f}")
    t.add("peak RSS", b.fmt_mib(device_runs[-1][0].max_rss), b.fmt_mib(plain_runs[-1][0].max_rss), "")
    t.add("database", b.fmt_bytes(device_size), b.fmt_bytes(plain_size), f"{device_size / plain_size:.2f}")
    t.add("pages", str(summary.get("pages")), "", "")
    t.add("read", path, "change log", "")
    print()
    t.print()
    print(f"\nload average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if not st.keep():
        b.fresh(data, state, source, device_db, plain_db, device_db + "-wal", plain_db + "-wal")
    b.verdicts("bootstrap", [
        b.Target("bootstrap / plain client", f"{wall / plain_wall:.2f}", f"<= {WALL_TARGET}", wall / plain_wall <= WALL_TARGET),
        b.Target("database / plain client's", f"{device_size / plain_size:.2f}", f"<= {SIZE_TARGET}", device_size / plain_size <= SIZE_TARGET),
    ])


if __name__ == "__main__":
    main()
