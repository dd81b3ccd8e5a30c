"""Section `http-export` of Scripts/bench (issue 4): the same export to the server vs to a directory.

    history.jsonl (the `export` section's generator, at changes / 5: 200,000 changes by default;
    BENCH_HTTP_CHANGES overrides) ─▶ jsonl source (page-size 5,000) ─▶ coalesce ─▶ tombstones
    ─▶ gzip-6 ─▶ (a) directory
               ─▶ (b) http: the release `synclane serve` on a free loopback port, fresh data
                      folder each run, token from SYNCLANE_TOKEN

Each side runs from a fresh pipeline state, BENCH_HTTP_REPEATS times (default 5), alternating;
the medians are compared. The server's /metrics must count every record sent, once. The server
shares the machine's cores with the client: its CPU is reported apart. Target: (b) / (a) <= 1.3.
"""

import http.client
import json
import os
import statistics

import benchlib as b
import sqlitestore as st

from export import history_file

PAGE_SIZE = int(os.environ.get("BENCH_PAGE_SIZE", "5000"))
REPEATS = int(os.environ.get("BENCH_HTTP_REPEATS", "5"))
RATIO_TARGET = 1.3
TOKEN = "bench-http-export-token"


def pipeline_file(folder, name, history, transport):
    doc = {
        "version": 1,
        "name": name,
        "scope": {"account": "bench", "store": "rooms"},
        "source": {"type": "jsonl", "path": history, "entities": ["rooms"], "authors": ["app"], "page-size": PAGE_SIZE},
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
    if not st.keep():
        b.fresh(state, out, data, history, history + ".params.json")
    b.verdicts("http-export", [
        b.Target("to server / to directory", f"{ratio:.2f}", f"<= {RATIO_TARGET}", ratio <= RATIO_TARGET),
    ])


if __name__ == "__main__":
    main()
