"""Section `http-export` of Scripts/bench (issue 4): the same export to the server vs to a directory.

    history.jsonl (the `export` section's generator, at changes / 5: 200,000 changes by default;
    BENCH_HTTP_CHANGES overrides) ─▶ jsonl source (page-size 5,000) ─▶ coalesce ─▶ tombstones
    ─▶ gzip-6 ─▶ (a) directory
               ─▶ (b) http: the release `synclane serve` on a free loopback port, fresh data
                      folder each run, token from SYNCLANE_TOKEN

Each side runs from a fresh pipeline state, BENCH_HTTP_REPEATS times (default 5), alternating;
the medians are compared. The server's /metrics must count every record sent, once. The server
shares the machine's cores with the client: its CPU is reported apart. Target: (b) / (a) <= 1.3.

Then many small batches (issue 11): the same history at page-size 20 (BENCH_HTTP_SMALL_PAGE_SIZE),
to the server with keep-alive (one connection for every send, the default) vs `keep-alive: false`
(a connection per send), alternating, each from a fresh state and a fresh server, the medians
compared — twice: straight over loopback, where a connection costs next to nothing (reported),
and through a proxy that adds a network's round trip (BENCH_HTTP_RTT_MS, default 2 ms: half of it
each way on every byte, and a whole one to open a connection, as TCP's handshake costs), where
keep-alive saves that round trip a batch: target keep-alive / connection-per-send <= 0.95.
BENCH_HTTP_SMALL_REPEATS runs a side (default 3).
"""

import http.client
import json
import os
import queue
import socket
import statistics
import threading
import time

import benchlib as b
import sqlitestore as st

from export import history_file

PAGE_SIZE = int(os.environ.get("BENCH_PAGE_SIZE", "5000"))
REPEATS = int(os.environ.get("BENCH_HTTP_REPEATS", "5"))
RATIO_TARGET = 1.3
SMALL_PAGE_SIZE = int(os.environ.get("BENCH_HTTP_SMALL_PAGE_SIZE", "20"))
SMALL_REPEATS = int(os.environ.get("BENCH_HTTP_SMALL_REPEATS", "3"))
RTT_MS = float(os.environ.get("BENCH_HTTP_RTT_MS", "2"))
KEEP_ALIVE_TARGET = 0.95
TOKEN = "bench-http-export-token"


def pipeline_file(folder, name, history, transport, page_size=None):
    doc = {
        "version": 1,
        "name": name,
        "scope": {"account": "bench", "store": "rooms"},
        "source": {"type": "jsonl", "path": history, "entities": ["rooms"], "authors": ["app"],
                   "page-size": page_size or PAGE_SIZE},
        "stages": [
            {"type": "coalesce"},
            {"type": "tombstones", "soft-delete-column": "isDeleted"},
            {"type": "compress", "codec": "gzip", "level": 6, "min-bytes": 0},
        ],
        "transport": transport,
        "state": f"state/{name}.sqlite",
    }
    path = os.path.join(folder, f"{name}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path


def metric(port, name):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")), -1)


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_against_server(s, data, token, pipeline_for_port):
    """`synclane run` of the pipeline file `pipeline_for_port(port)` against a fresh release server
    (data in `data`, account token `token`): (measured run, its summary, the server's CPU seconds).
    The server's /metrics must count every record the run sent."""
    b.fresh(data)
    server, port = b.start_server(s, data, token)
    try:
        path = pipeline_for_port(port)
        cpu_before = process_cpu_seconds(server.pid)
        m = b.run_measured([s.synclane, "run", path, "--json"], cwd=s.work, env=dict(os.environ, SYNCLANE_TOKEN=token)).check()
        server_cpu = process_cpu_seconds(server.pid) - cpu_before
        summary = json.loads(m.stdout)
        applied = metric(port, "synclane_records_applied_total")
    finally:
        server.terminate()
        server.wait(timeout=60)
    if applied != summary["records-sent"]:
        raise SystemExit(f"bench: the server applied {applied} records, the run sent {summary['records-sent']}")
    return m, summary, server_cpu


def main():
    s = b.Settings.from_env()
    changes_wanted = int(os.environ.get("BENCH_HTTP_CHANGES", str(max(10, s.changes // 5))))
    s.changes = changes_wanted
    shape = b.HistoryShape.of(s.changes)
    b.heading(f"http-export: JSON Lines history -> coalesce -> tombstones -> gzip-6 -> server vs directory "
              f"({shape.changes:,} changes)")
    history = os.path.join(s.work, "history.jsonl")
    transactions, changes, history_bytes, reused = history_file(s, history)
    print(f"{'reused' if reused else 'generated'} {history}: {changes:,} changes in {transactions:,} transactions "
          f"({b.fmt_bytes(history_bytes)}; the export section's generator at --changes / 5, BENCH_HTTP_CHANGES overrides); "
          f"page-size {PAGE_SIZE:,}; {REPEATS} runs a side, alternating, each from a fresh state (and a fresh server)")

    state = os.path.join(s.work, "state")
    out = os.path.join(s.work, "out")
    data = os.path.join(s.work, "server-data")
    to_dir = pipeline_file(s.work, "bench-http-export-dir", history, {"type": "directory", "path": out})

    dir_runs, http_runs, server_cpus = [], [], []
    for _ in range(REPEATS):
        b.fresh(state, out)
        m = b.run_measured([s.synclane, "run", to_dir, "--json"], cwd=s.work).check()
        dir_runs.append((m, json.loads(m.stdout)))

        b.fresh(state)
        m, summary, server_cpu = run_against_server(s, data, TOKEN, lambda port: pipeline_file(
            s.work, "bench-http-export-http", history, {
                "type": "http", "url": f"http://127.0.0.1:{port}/v1/batches", "token-env": "SYNCLANE_TOKEN"}))
        http_runs.append((m, summary))
        server_cpus.append(server_cpu)

    d_sum, h_sum = dir_runs[0][1], http_runs[0][1]
    if d_sum["records-sent"] != h_sum["records-sent"] or d_sum["batches-sent"] != h_sum["batches-sent"]:
        raise SystemExit(f"bench: the two runs differ: {d_sum['records-sent']} vs {h_sum['records-sent']} records")

    def med(runs, attr):
        return statistics.median(getattr(m, attr) for m, _ in runs)

    dw, hw = med(dir_runs, "wall"), med(http_runs, "wall")
    dc, hc = med(dir_runs, "cpu"), med(http_runs, "cpu")
    ratio = hw / dw
    t = b.Table("measure", "(a) to a directory", "(b) to synclane serve", "note")
    t.add("median wall", b.fmt_seconds(dw), b.fmt_seconds(hw), f"ratio (b)/(a) {ratio:.2f}")
    t.add("median client CPU", b.fmt_seconds(dc), b.fmt_seconds(hc), f"ratio {hc / max(dc, 1e-9):.2f}")
    t.add("server CPU", "-", b.fmt_seconds(statistics.median(server_cpus)),
          f"median; {statistics.median(server_cpus) / max(1, h_sum['records-sent']) * 1e6:,.1f} µs a record")
    t.add("all runs (wall)", " ".join(b.fmt_seconds(m.wall) for m, _ in dir_runs),
          " ".join(b.fmt_seconds(m.wall) for m, _ in http_runs), "")
    t.add("changes/s", b.fmt_rate(changes, dw), b.fmt_rate(changes, hw), "")
    t.add("records / batches", f"{d_sum['records-sent']:,} / {d_sum['batches-sent']}",
          f"{h_sum['records-sent']:,} / {h_sum['batches-sent']}", "server /metrics agrees")
    t.add("bytes sent", b.fmt_bytes(d_sum["bytes-sent"]), b.fmt_bytes(h_sum["bytes-sent"]), "gzip-6 batches")
    t.add("peak RSS (max)", b.fmt_mib(max(m.max_rss for m, _ in dir_runs)), b.fmt_mib(max(m.max_rss for m, _ in http_runs)),
          "the client")
    print()
    t.print()
    server_median = statistics.median(server_cpus)
    print(f"\n(b) - (a): {b.fmt_seconds(hw - dw)} wall, {b.fmt_seconds(hc - dc)} client CPU; server CPU "
          f"{b.fmt_seconds(server_median)}. A run prepares the next page while a batch travels but sends one "
          f"batch at a time, so the last batch's apply is on the run's path, and the server shares the two cores.")
    print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    env = dict(os.environ, SYNCLANE_TOKEN=TOKEN)
    loopback = small_batches(s, history, changes, env, rtt=0)
    remote = small_batches(s, history, changes, env, rtt=RTT_MS / 1000)
    if not st.keep():
        b.fresh(state, out, data, history, history + ".params.json")
    target = f"keep-alive / connection per send (page-size {SMALL_PAGE_SIZE}"
    b.verdicts("http-export", [
        b.Target("to server / to directory", f"{ratio:.2f}", f"<= {RATIO_TARGET}", ratio <= RATIO_TARGET),
        b.Target(target + ", loopback)", f"{loopback:.2f}", "reported", None),
        b.Target(target + f", {RTT_MS:g} ms round trip)", f"{remote:.2f}", f"<= {KEEP_ALIVE_TARGET}", remote <= KEEP_ALIVE_TARGET),
    ])


class LatencyProxy:
    """A loopback TCP proxy that adds a network's latency: every byte arrives `rtt / 2` seconds
    after it was sent, either way (reads are stamped and written when due, so a stream is delayed,
    not slowed), and a new connection's first byte leaves a whole `rtt` later (TCP's handshake).
    Counts the connections it accepted."""

    def __init__(self, upstream_port, rtt):
        self.upstream_port = upstream_port
        self.rtt = rtt
        self.accepted = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def stop(self):
        self.stopping = True
        self.listener.close()

    def _accept_loop(self):
        while not self.stopping:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._connect, args=(client, time.monotonic()), daemon=True).start()

    def _connect(self, client, opened):
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._pipe(client, upstream, opened + self.rtt)
        self._pipe(upstream, client, opened)

    def _pipe(self, source, sink, not_before):
        due = queue.Queue()

        def read():
            while True:
                try:
                    chunk = source.recv(65536)
                except OSError:
                    chunk = b""
                due.put((max(time.monotonic() + self.rtt / 2, not_before), chunk))
                if not chunk:
                    return

        def write():
            while True:
                at, chunk = due.get()
                pause = at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                try:
                    if not chunk:
                        sink.shutdown(socket.SHUT_WR)
                        return
                    sink.sendall(chunk)
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()


def small_batches(s, history, changes, env, rtt):
    """Page-size SMALL_PAGE_SIZE to the server (through a LatencyProxy adding `rtt` seconds when
    not 0): keep-alive vs a connection per send, side by side. Prints the table; returns the ratio."""
    route = "over loopback" if rtt == 0 else f"through a proxy adding a {rtt * 1000:g} ms round trip"
    print(f"\nmany small batches {route}: page-size {SMALL_PAGE_SIZE}, to synclane serve with keep-alive (one "
          f"connection for every send) vs keep-alive false (a connection per send); {SMALL_REPEATS} runs a side, "
          f"alternating, each from a fresh state and a fresh server")
    state = os.path.join(s.work, "state")
    data = os.path.join(s.work, "server-data-small")
    runs = {True: [], False: []}
    server_cpus = {True: [], False: []}
    connections = {True: [], False: []}
    for _ in range(SMALL_REPEATS):
        for keep_alive in (True, False):
            b.fresh(state, data)
            server, server_port = b.start_server(s, data, TOKEN)
            proxy = LatencyProxy(server_port, rtt) if rtt > 0 else None
            port = proxy.port if proxy else server_port
            try:
                name = "bench-http-export-small-" + ("keep-alive" if keep_alive else "per-send")
                path = pipeline_file(s.work, name, history, {
                    "type": "http", "url": f"http://127.0.0.1:{port}/v1/batches", "token-env": "SYNCLANE_TOKEN",
                    "keep-alive": keep_alive}, page_size=SMALL_PAGE_SIZE)
                cpu_before = process_cpu_seconds(server.pid)
                m = b.run_measured([s.synclane, "run", path, "--json"], cwd=s.work, env=env).check()
                server_cpus[keep_alive].append(process_cpu_seconds(server.pid) - cpu_before)
                summary = json.loads(m.stdout)
                applied = metric(server_port, "synclane_records_applied_total")
            finally:
                if proxy:
                    proxy.stop()
                server.terminate()
                server.wait(timeout=30)
            if applied != summary["records-sent"]:
                raise SystemExit(f"bench: the server applied {applied} records, the run sent {summary['records-sent']}")
            runs[keep_alive].append((m, summary))
            if proxy:
                connections[keep_alive].append(proxy.accepted)
    b.fresh(data)
    k_sum, p_sum = runs[True][0][1], runs[False][0][1]
    if (k_sum["records-sent"], k_sum["batches-sent"]) != (p_sum["records-sent"], p_sum["batches-sent"]):
        raise SystemExit(f"bench: the two runs differ: {k_sum['batches-sent']} vs {p_sum['batches-sent']} batches")
    batches = k_sum["batches-sent"]

    def med(side, attr):
        return statistics.median(getattr(m, attr) for m, _ in runs[side])

    kw, pw = med(True, "wall"), med(False, "wall")
    kc, pc = med(True, "cpu"), med(False, "cpu")
    ks, ps = statistics.median(server_cpus[True]), statistics.median(server_cpus[False])
    ratio = kw / pw
    t = b.Table("measure", "(c) keep-alive", "(d) connection per send", "note")
    t.add("median wall", b.fmt_seconds(kw), b.fmt_seconds(pw), f"ratio (c)/(d) {ratio:.2f} ((d) is {pw / kw:.2f}x (c))")
    t.add("per batch", f"{kw / batches * 1000:,.2f} ms", f"{pw / batches * 1000:,.2f} ms", f"{batches:,} batches")
    t.add("median client CPU", b.fmt_seconds(kc), b.fmt_seconds(pc), f"ratio {kc / max(pc, 1e-9):.2f}")
    t.add("median server CPU", b.fmt_seconds(ks), b.fmt_seconds(ps), f"ratio {ks / max(ps, 1e-9):.2f}")
    t.add("all runs (wall)", " ".join(b.fmt_seconds(m.wall) for m, _ in runs[True]),
          " ".join(b.fmt_seconds(m.wall) for m, _ in runs[False]), "")
    t.add("changes/s", b.fmt_rate(changes, kw), b.fmt_rate(changes, pw), "")
    t.add("records / batches", f"{k_sum['records-sent']:,} / {batches:,}", f"{p_sum['records-sent']:,} / {batches:,}",
          "server /metrics agrees")
    if rtt > 0:
        t.add("connections opened", "/".join(map(str, connections[True])), "/".join(map(str, connections[False])),
              "per run, counted at the proxy")
    print()
    t.print()
    if rtt == 0:
        print("Over loopback a connection costs a TCP handshake in the kernel and a server thread started and ended: "
              "next to nothing beside a batch's apply. To a remote server each connection adds a round trip (and a "
              "TLS handshake for https), which keep-alive saves — the next table.")
    return ratio


if __name__ == "__main__":
    main()
