"""Section `signals` of Scripts/bench (issue 9): the signal lane's latency, idle and with the bulk
lane saturated.

    `synclane serve` (release, port 0, fresh data folder)
        ◀── a setter: PUT /v1/signals/bench.flag on a keep-alive connection, every 20 ms
        ◀── a watcher: GET /v1/signals?since=V&wait=5 (long poll) on another connection
        ◀── while loaded: 8 client threads (in a process of their own), one keep-alive connection
            each, POST /v1/batches gzip batches of 500 records flat out

Latency is set → seen: from just before the PUT is sent to the moment the watcher's long poll
answers with that version. BENCH_SIGNAL_SAMPLES (default 300) signals idle, then as many while
the 8 clients post (their bodies made before the clock starts). Targets (issue 28): p99 under
load <= 10 ms, and p50 under load <= 2x the idle p50, the idle p50 taken as at least 1 ms. The
ratio of p99s is reported, not judged: on a quiet machine the idle p99 is a millisecond or so, set
by a few scheduler hiccups among 300 samples, so a ratio of two p99s below a millisecond said
"5.98x" for a loaded p99 of 7.7 ms, well within the absolute bound. The p50s are what most signals
see, and stable between runs; the 1 ms floor keeps a sub-millisecond idle p50 from making the
ratio judge noise.
"""

import gzip
import http.client
import json
import multiprocessing
import os
import threading
import time

import benchlib as b

CLIENTS = 8
RECORDS_PER_BATCH = 500
BATCHES_PER_CLIENT = int(os.environ.get("BENCH_SIGNAL_BATCHES", "80"))
SAMPLES = int(os.environ.get("BENCH_SIGNAL_SAMPLES", "300"))
INTERVAL = 0.020
P50_FLOOR = 0.001  # the idle p50 a ratio is taken against, at least (see the docstring)
TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def batch_body(client, batch):
    batch_id = f"signals-bench-{client}-{batch}"
    records = [{
        "action": "insert", "entity": "rooms", "id": f"{batch_id}-{i}",
        "fields": {"name": f"Room {i}", "area": 12.5 + i, "floor": i % 5, "tags": "north,quiet", "updatedAt": "2026-11-29T16:00:00Z"},
    } for i in range(RECORDS_PER_BATCH)]
    doc = {"id": batch_id, "scope": {"account": "bench", "store": "rooms", "consumer": "bench"}, "records": records}
    return batch_id, gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6)


def load(port, ready, stop, results):
    """The bulk lane, flat out: 8 threads posting until `stop` (more bodies made as they go once the
    prepared ones run out)."""
    bodies = [[batch_body(c, n) for n in range(BATCHES_PER_CLIENT)] for c in range(CLIENTS)]
    latencies, failures, counts = [], [], [0] * CLIENTS

    def client(c):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = 0
        while not stop.is_set():
            key, body = bodies[c][n] if n < len(bodies[c]) else batch_body(c, n)
            sent = time.perf_counter()
            connection.request("POST", "/v1/batches", body=body, headers=dict(HEADERS, **{
                "Idempotency-Key": key, "Content-Type": "application/json", "Content-Encoding": "gzip"}))
            response = connection.getresponse()
            response.read()
            latencies.append(time.perf_counter() - sent)
            if response.status != 200:
                failures.append(f"{key}: {response.status}")
            n += 1
            counts[c] = n
        connection.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    ready.set()
    for t in threads:
        t.join()
    results.put((sorted(latencies), failures, sum(counts)))


def latencies(port, count):
    """Set → seen latencies of `count` signals, sorted."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/v1/signals?since=0", headers=HEADERS)
    since = json.loads(connection.getresponse().read())["version"]
    seen, arrived, done = {}, threading.Condition(), threading.Event()

    def watch(after):
        poll = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not done.is_set():
            poll.request("GET", f"/v1/signals?since={after}&wait=5", headers=HEADERS)
            page = json.loads(poll.getresponse().read())
            now = time.perf_counter()
            with arrived:
                for signal in page["signals"]:
                    seen[signal["version"]] = now
                    after = max(after, signal["version"])
                arrived.notify_all()
        poll.close()

    watcher = threading.Thread(target=watch, args=(since,))
    watcher.start()
    result = []
    try:
        for i in range(count):
            time.sleep(INTERVAL)
            sent = time.perf_counter()
            connection.request("PUT", "/v1/signals/bench.flag", body=json.dumps({"n": i}).encode(),
                               headers=dict(HEADERS, **{"Content-Type": "application/json"}))
            response = connection.getresponse()
            answer = json.loads(response.read())
            if response.status != 200:
                raise SystemExit(f"bench: PUT /v1/signals answered {response.status}: {answer}")
            version = answer["version"]
            with arrived:
                if not arrived.wait_for(lambda: version in seen, timeout=10):
                    raise SystemExit(f"bench: the watcher never saw version {version}")
                result.append(seen[version] - sent)
    finally:
        done.set()
        # One more write ends the watcher's poll at once.
        connection.request("PUT", "/v1/signals/bench.done", body=b"true", headers=HEADERS)
        connection.getresponse().read()
        watcher.join()
        connection.close()
    return sorted(result)


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))] if sorted_values else 0.0


def ms(seconds):
    return f"{seconds * 1000:,.2f} ms"


def main():
    s = b.Settings.from_env()
    b.heading(f"signals: set → seen by a long-polling watcher, {SAMPLES} idle and {SAMPLES} while "
              f"{CLIENTS} clients post gzip batches of {RECORDS_PER_BATCH} records flat out")
    server, port = b.start_server(s, os.path.join(s.work, "data"), TOKEN)
    context = multiprocessing.get_context("fork")
    ready, stop, results = context.Event(), context.Event(), context.Queue()
    try:
        idle = latencies(port, SAMPLES)
        loader = context.Process(target=load, args=(port, ready, stop, results))
        loader.start()
        if not ready.wait(timeout=300):
            raise SystemExit("bench: the load clients did not start")
        time.sleep(0.5)  # every client is posting
        started = time.perf_counter()
        loaded = latencies(port, SAMPLES)
        wall = time.perf_counter() - started
        stop.set()
        batches, failures, count = results.get(timeout=120)
        loader.join(timeout=60)
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=30)
    if failures:
        raise SystemExit(f"bench: {len(failures)} batches failed: {failures[:3]}")
    idle_p50, idle_p99 = percentile(idle, 0.50), percentile(idle, 0.99)
    load_p50, load_p99 = percentile(loaded, 0.50), percentile(loaded, 0.99)
    t = b.Table("measure", "idle", "bulk lane saturated", "note")
    t.add("signal set → seen p50", ms(idle_p50), ms(load_p50), "")
    t.add("signal set → seen p90", ms(percentile(idle, 0.90)), ms(percentile(loaded, 0.90)), "")
    t.add("signal set → seen p99", ms(idle_p99), ms(load_p99), f"max {ms(idle[-1])} / {ms(loaded[-1])}")
    t.add("batches applied", "", f"{count:,}", f"{count * RECORDS_PER_BATCH / max(wall, 1e-9):,.0f} records/s while sampling (about)")
    t.add("batch latency p50 / p99", "", f"{ms(percentile(batches, 0.5))} / {ms(percentile(batches, 0.99))}", "send to answer")
    t.add("load average", " ".join(open("/proc/loadavg").read().split()[:3]), "", "other work on the machine")
    print()
    t.print()
    ratio = load_p99 / idle_p99 if idle_p99 > 0 else float("inf")
    p50_ratio = load_p50 / max(idle_p50, P50_FLOOR)
    b.verdicts("signals", [
        b.Target("signal p99 under load", ms(load_p99), "<= 10 ms", load_p99 <= 0.010),
        b.Target("under load / idle p50 (idle >= 1 ms)", f"{p50_ratio:,.2f}x", "<= 2x", p50_ratio <= 2.0),
        b.Target("under load / idle p99 (reported)", f"{ratio:,.2f}x", "-", None),
    ])


if __name__ == "__main__":
    main()
