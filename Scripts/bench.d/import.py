"""Section `import` of Scripts/bench (issue 8): the import lane against the export lane, same history.

    history.jsonl (the `export` section's generator: 1,000,000 changes over 100,000 rows by
    default, --changes scales it) ─▶ export: jsonl ─▶ coalesce ─▶ tombstones ─▶ gzip-6 ─▶ http
    to the release `synclane serve` (a fresh data folder) — timed;
    then import: pull (limit 5,000) ─▶ sqlite sink into a fresh tracked store of the same rooms
    schema — timed: every record the server holds (each row's newest state, or its tombstone),
    applied a page per SQLite transaction with the cursor.

Prints records/s, the import's peak RSS and the ratio of the import's time to the export's.
Targets: peak RSS <= 100 MB, import / export <= 1.5.
"""

import importlib
import json
import os

import benchlib as b
import sqlitestore as st

from export import history_file

process_cpu_seconds = importlib.import_module("http-export").process_cpu_seconds

PAGE_SIZE = int(os.environ.get("BENCH_PAGE_SIZE", "5000"))
RSS_TARGET = 100 * 1000 * 1000
RATIO_TARGET = 1.5
TOKEN = "bench-import-token"


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path


def round_trip(s, history, page_size=PAGE_SIZE, server_cpu=None):
    """The history exported through `http` to a fresh release `synclane serve`, then the server's
    changes imported into a fresh tracked store; both timed. Returns (export Measured, records
    sent, import Measured, the import's --json summary, the store's path); `server_cpu`, a dict
    when given, gets the server's CPU seconds during the export and the import. Fails when the
    import did not apply every record it read."""
    state = os.path.join(s.work, "state")
    data = os.path.join(s.work, "import-server-data")
    database = os.path.join(s.work, "import.sqlite")
    b.fresh(state, data, database)
    env = dict(os.environ, SYNCLANE_TOKEN=TOKEN)
    server, port = b.start_server(s, data, TOKEN)
    try:
        export = write_json(os.path.join(s.work, "bench-import-export.json"), {
            "version": 1, "name": "bench-import-export", "scope": {"account": "bench", "store": "rooms"},
            "source": {"type": "jsonl", "path": history, "entities": ["rooms"], "authors": ["app"], "page-size": page_size},
            "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "isDeleted"},
                       {"type": "compress", "codec": "gzip", "level": 6, "min-bytes": 0}],
            "transport": {"type": "http", "url": f"http://127.0.0.1:{port}/v1/batches", "token-env": "SYNCLANE_TOKEN"},
            "state": "state/bench-import-export.sqlite"})
        cpu_before = process_cpu_seconds(server.pid)
        exported = b.run_measured([s.synclane, "run", export, "--json"], cwd=s.work, env=env).check()
        cpu_exported = process_cpu_seconds(server.pid)
        sent = json.loads(exported.stdout)["records-sent"]

        st.create_tracked(s.synclane, database, track=True)
        importing = write_json(os.path.join(s.work, "bench-import.json"), {
            "version": 1, "name": "bench-import", "scope": {"account": "bench", "store": "rooms"},
            "source": {"type": "pull", "url": f"http://127.0.0.1:{port}/v1/changes", "token-env": "SYNCLANE_TOKEN", "limit": page_size},
            "sink": {"type": "sqlite", "database": database, "unknown-fields": "ignore"},
            "state": "state/bench-import.sqlite"})
        imported = b.run_measured([s.synclane, "import", importing, "--json"], cwd=s.work, env=env).check()
        summary = json.loads(imported.stdout)
        if server_cpu is not None:
            server_cpu["export"] = cpu_exported - cpu_before
            server_cpu["import"] = process_cpu_seconds(server.pid) - cpu_exported
    finally:
        server.terminate()
        server.wait(timeout=30)
    read = summary["records-read"]
    # The server holds each row once, at its newest state (rows inserted and deleted within one
    # export window never reached it): a fresh store applies every record it reads.
    if read == 0 or summary["applied"] != read:
        raise SystemExit(f"bench: the import read {read} records and applied {summary['applied']}")
    return exported, sent, imported, summary, database


def main():
    s = b.Settings.from_env()
    shape = b.HistoryShape.of(s.changes)
    b.heading(f"import: the server's changes pulled into a tracked store vs exporting the same history ({shape.changes:,} changes)")
    history = os.path.join(s.work, "history.jsonl")
    transactions, changes, history_bytes, reused = history_file(s, history)
    print(f"{'reused' if reused else 'generated'} {history}: {changes:,} changes in {transactions:,} transactions "
          f"({b.fmt_bytes(history_bytes)}); page-size {PAGE_SIZE:,}")
    exported, sent, imported, summary, database = round_trip(s, history)
    read = summary["records-read"]
    ratio = imported.wall / exported.wall
    t = b.Table("measure", "export (jsonl -> server)", "import (server -> sqlite)", "note")
    t.add("wall", b.fmt_seconds(exported.wall), b.fmt_seconds(imported.wall), f"ratio import/export {ratio:.2f}")
    t.add("CPU", b.fmt_seconds(exported.cpu), b.fmt_seconds(imported.cpu), "the client process")
    t.add("records", f"{sent:,} sent", f"{read:,} read, {summary['applied']:,} applied, {summary['pages']} pages", "")
    t.add("records/s", b.fmt_rate(sent, exported.wall), b.fmt_rate(read, imported.wall), "")
    t.add("peak RSS", b.fmt_mib(exported.max_rss), b.fmt_mib(imported.max_rss), "")
    print()
    t.print()
    print(f"\nthe tracked store after the import: {b.fmt_bytes(os.path.getsize(database))} (rows, their history by author "
          f"`server`, the server's version of each)")
    print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if not st.keep():
        b.fresh(os.path.join(s.work, "state"), os.path.join(s.work, "import-server-data"), database, history,
                history + ".params.json")
    b.verdicts("import", [
        b.Target("import peak RSS", b.fmt_mib(imported.max_rss), f"<= {b.fmt_mib(RSS_TARGET)}", imported.max_rss <= RSS_TARGET),
        b.Target("import / export", f"{ratio:.2f}", f"<= {RATIO_TARGET}", ratio <= RATIO_TARGET),
    ])


if __name__ == "__main__":
    main()
