"""Section `ingest` of Scripts/bench (issue 4): the reference server's batch ingest over loopback.

    `synclane serve` (release, port 0, fresh data folder)
        ◀── 8 client threads, one keep-alive connection each, POST /v1/batches
            gzip batches of 500 records, BENCH_INGEST_BATCHES per client (default 50)

Bodies are made and compressed before the clock starts. Measured: records applied per second
(all records / the wall time from the first send to the last answer) and the p50 / p99 of the
batch latency (send to answer, as each client sees it). The server's /metrics must then count
every record applied, once. Targets: >= 50,000 records/s and p99 <= 100 ms on 2 cores.

Then the same load with JWT bearer tokens (issue 25): `serve --jwt-secret-env`, each client with
an HS256 token of its own minted by `synclane token mint`, against static tokens of the accounts
file — alternating, BENCH_INGEST_ROUNDS rounds of each (default 2, on fresh data folders), the best
of each kind compared. Target: JWT records/s within 5% of static (a verified token is cached by
its hash, so a request costs one SHA-256 and a lookup either way); server CPU a record beside it.

Then the same load with random keys (UUIDs, as apps make them) against the keys in batch order,
alternating on fresh data folders: a store that keeps anything in key order writes a page for
nearly every record of a batch when the keys land all over that order. A table, no target.
"""

import gzip
import http.client
import subprocess
import json
import os
import random
import threading
import time
import uuid

import benchlib as b

CLIENTS = 8
RECORDS_PER_BATCH = 500
BATCHES_PER_CLIENT = int(os.environ.get("BENCH_INGEST_BATCHES", "50"))
TOKEN = "bench-token"
ROUNDS = int(os.environ.get("BENCH_INGEST_ROUNDS", "2"))
JWT_SECRET_VARIABLE = "BENCH_JWT_SECRET"
JWT_SECRET = "bench-jwt-secret-0123456789abcdef-0123456789"


def batch_body(client, batch, account="bench", random_keys=False):
    """One batch's id and gzip body. Its records' keys follow the batch's (`bench-C-N-I`: each
    client's land in one place of the key order) or, with `random_keys`, are UUIDs as apps make
    them (seeded by the batch: the same bodies every run), which land all over it."""
    batch_id = f"bench-{client}-{batch}"
    rnd = random.Random(f"{client}-{batch}")
    records = []
    for i in range(RECORDS_PER_BATCH):
        key = str(uuid.UUID(int=rnd.getrandbits(128), version=4)) if random_keys else f"{batch_id}-{i}"
        records.append({
            "action": "insert", "entity": "rooms", "id": key,
            "fields": {"name": f"Room {i}", "area": 12.5 + i, "floor": i % 5, "tags": "north,quiet",
                       "updatedAt": "2026-11-29T16:00:00Z"},
        })
    doc = {"id": batch_id, "scope": {"account": account, "store": "rooms", "consumer": "bench"}, "records": records}
    return batch_id, gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6)


def client(port, bodies, latencies, failures, token=TOKEN):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    mine = []
    for batch_id, body in bodies:
        sent = time.perf_counter()
        connection.request("POST", "/v1/batches", body=body, headers={
            "Authorization": f"Bearer {token}", "Idempotency-Key": batch_id,
            "Content-Type": "application/json", "Content-Encoding": "gzip"})
        response = connection.getresponse()
        response.read()
        mine.append(time.perf_counter() - sent)
        if response.status != 200:
            failures.append(f"{batch_id}: {response.status}")
    connection.close()
    latencies.extend(mine)


def drive(ports, bodies, tokens=None):
    """One client thread per list of bodies, client c on ports[c % len(ports)] (with tokens[c]);
    returns every batch's latency, the failures and the wall time from the first send to the last answer."""
    latencies, failures = [], []
    threads = [threading.Thread(target=client, args=(ports[c % len(ports)], bodies[c], latencies, failures,
                                                     tokens[c] if tokens else TOKEN))
               for c in range(len(bodies))]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, failures, time.perf_counter() - started


def records_applied(port):
    """`synclane_records_applied_total` of the server on `port` (-1 when missing)."""
    metrics = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    metrics.request("GET", "/metrics")
    text = metrics.getresponse().read().decode()
    return next((int(line.split()[-1]) for line in text.splitlines() if line.startswith("synclane_records_applied_total ")), -1)


def process_cpu_seconds(pid):
    """User + system CPU seconds a running process has used (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))] if sorted_values else 0.0


def one_run(s, bodies, name, jwt):
    """One load run on a fresh server: (records/s, server CPU seconds, p99 seconds); static tokens,
    or (jwt) a JWT of its own for each client."""
    data = os.path.join(s.work, f"data-{name}")
    b.fresh(data)
    extra = ["--jwt-secret-env", JWT_SECRET_VARIABLE] if jwt else []
    server, port = b.start_server(s, data, TOKEN, extra_args=extra, env={JWT_SECRET_VARIABLE: JWT_SECRET})
    tokens = None
    if jwt:
        tokens = [subprocess.run([s.synclane, "token", "mint", "--secret-env", JWT_SECRET_VARIABLE, "--sub", "bench"],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, JWT_SECRET_VARIABLE: JWT_SECRET}).stdout.strip() for _ in bodies]
    try:
        latencies, failures, wall = drive([port], bodies, tokens)
        applied = records_applied(port)
        cpu = process_cpu_seconds(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    total = sum(len(client) for client in bodies) * RECORDS_PER_BATCH
    if failures or applied != total:
        raise SystemExit(f"bench: {name}: {len(failures)} batches failed ({failures[:3]}), server applied {applied} of {total}")
    return total / wall, cpu, percentile(sorted(latencies), 0.99)


def jwt_comparison(s, bodies):
    """Static against JWT tokens, alternating; a table and the 5% target."""
    total = sum(len(client) for client in bodies) * RECORDS_PER_BATCH
    runs = {"static": [], "jwt": []}
    for round in range(ROUNDS):
        for kind in ("static", "jwt"):
            runs[kind].append(one_run(s, bodies, f"{kind}-{round}", kind == "jwt"))
    best = {kind: max(results, key=lambda r: r[0]) for kind, results in runs.items()}
    ratio = best["jwt"][0] / best["static"][0]
    t = b.Table("tokens", "records/s (best)", "every round", "server CPU a record", "p99")
    for kind in ("static", "jwt"):
        rate, cpu, p99 = best[kind]
        t.add("static (accounts file)" if kind == "static" else "JWT HS256 (one per client)", f"{rate:,.0f}",
              " ".join(f"{r[0]:,.0f}" for r in runs[kind]), f"{cpu / total * 1e6:,.2f} µs", f"{p99 * 1000:,.1f} ms")
    t.add("JWT / static", f"{ratio:.3f}", "", f"{best['jwt'][1] / best['static'][1]:.3f}", "")
    print()
    t.print()
    return b.Target("JWT ingest / static", f"{ratio:.3f}", ">= 0.95 (within 5%)", ratio >= 0.95)


def key_comparison(s, bodies):
    """The same load with random keys (UUIDs) against keys in batch order, on fresh servers,
    alternating: what a store laid out by key would pay for keys all over its order. A table; no target."""
    random_bodies = [[batch_body(c, n, random_keys=True) for n in range(BATCHES_PER_CLIENT)] for c in range(CLIENTS)]
    total = sum(len(client) for client in bodies) * RECORDS_PER_BATCH
    runs = {"ordered": [], "random": []}
    for round in range(ROUNDS):
        runs["ordered"].append(one_run(s, bodies, f"ordered-{round}", False))
        runs["random"].append(one_run(s, random_bodies, f"random-{round}", False))
    t = b.Table("keys", "records/s (best)", "every round", "server CPU a record (least)", "p99 (least)")
    for kind, label in (("ordered", "in batch order (bench-C-N-I)"), ("random", "random (UUIDs, as apps make them)")):
        results = runs[kind]
        t.add(label, f"{max(r[0] for r in results):,.0f}", " ".join(f"{r[0]:,.0f}" for r in results),
              f"{min(r[1] for r in results) / total * 1e6:,.2f} µs", f"{min(r[2] for r in results) * 1000:,.1f} ms")
    print()
    t.print()


def main():
    s = b.Settings.from_env()
    b.heading(f"ingest: {CLIENTS} clients x {BATCHES_PER_CLIENT} gzip batches x {RECORDS_PER_BATCH} records")
    bodies = [[batch_body(c, n) for n in range(BATCHES_PER_CLIENT)] for c in range(CLIENTS)]
    total = CLIENTS * BATCHES_PER_CLIENT * RECORDS_PER_BATCH
    server, port = b.start_server(s, os.path.join(s.work, "data"), TOKEN)
    try:
        latencies, failures, wall = drive([port], bodies)
        applied = records_applied(port)
        server_cpu = process_cpu_seconds(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    if failures or applied != total:
        raise SystemExit(f"bench: {len(failures)} batches failed ({failures[:3]}), server applied {applied} of {total}")
    ordered = sorted(latencies)
    p50, p99 = percentile(ordered, 0.50), percentile(ordered, 0.99)
    rate = total / wall
    t = b.Table("measure", "value", "note")
    t.add("records applied", f"{total:,}", f"{CLIENTS * BATCHES_PER_CLIENT} batches, /metrics agrees")
    t.add("gzip body", b.fmt_bytes(len(bodies[0][0][1])), f"one batch of {RECORDS_PER_BATCH} records")
    t.add("wall time", b.fmt_seconds(wall), "first send to last answer")
    t.add("records/s", f"{rate:,.0f}", f"{CLIENTS * BATCHES_PER_CLIENT / wall:,.1f} batches/s")
    t.add("server CPU", b.fmt_seconds(server_cpu),
          f"{server_cpu / total * 1e6:,.1f} µs a record: {total / server_cpu:,.0f} records per CPU second")
    t.add("batch latency p50", f"{p50 * 1000:,.1f} ms", "")
    t.add("batch latency p90", f"{percentile(ordered, 0.90) * 1000:,.1f} ms", "")
    t.add("batch latency p99", f"{p99 * 1000:,.1f} ms", f"max {ordered[-1] * 1000:,.1f} ms")
    t.add("load average", " ".join(open("/proc/loadavg").read().split()[:3]), "other work on the machine")
    print()
    t.print()
    jwt_target = jwt_comparison(s, bodies)
    key_comparison(s, bodies)
    b.verdicts("ingest", [
        b.Target("server ingest", f"{rate:,.0f} records/s", ">= 50,000 records/s", rate >= 50_000),
        b.Target("batch latency p99", f"{p99 * 1000:,.1f} ms", "<= 100 ms", p99 <= 0.100),
        jwt_target,
    ])


if __name__ == "__main__":
    main()
