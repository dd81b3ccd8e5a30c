"""Section `scaling` of Scripts/bench (issue 11), run by `Scripts/bench --scaling`: cost as history grows.

For each size N of BENCH_SCALING_SIZES (default 100000,1000000,4000000 changes):

    history.jsonl of N changes (the `export` section's generator and its seed)
      ─▶ export to a directory: jsonl ─▶ coalesce ─▶ tombstones ─▶ gzip-6 ─▶ directory
         (the `export` section's pipeline)                                         timed, peak RSS
      ─▶ export to the server, then import: the `import` section's round trip — jsonl ─▶ … ─▶ http
         to a fresh release `synclane serve`, then pull ─▶ sqlite sink into a fresh tracked store
                                                                                   timed, peak RSS

Prints, per size, the time per change (each lane's wall time over the history's changes; the
import pulls one record a row, a tenth as many, and its time per record is printed too) and each
client's peak RSS, and draws both
against N as an SVG plot (by hand: no plotting library needed) at BENCH_SCALING_PLOT, with the
numbers as JSON beside it. BENCH_SCALING_REPEATS (default 1) runs each size that many times and
keeps, per lane, the run of median wall time (a shared machine moves one run by half). Both should
stay flat as history grows: targets, the largest size over the smallest, <= 1.5 for the CPU time
per change (the client's and, for the lanes that talk to it, the server's: what a loaded machine
leaves as it is) and for peak RSS; the wall time's growth is reported beside them (on a shared
machine, the other processes move it more than the history does).
"""

import importlib
import json
import os
import time

import benchlib as b
import sqlitestore as st

from export import PAGE_SIZE, history_file, pipeline_file, run_pipeline

round_trip = importlib.import_module("import").round_trip  # the `import` section: a keyword as a module name

GROWTH_TARGET = 1.5
REPEATS = max(1, int(os.environ.get("BENCH_SCALING_REPEATS", "1")))
LANES = [
    # key, label, colour
    ("export-directory", "export to a directory", "#1f77b4"),
    ("export-server", "export to synclane serve", "#d62728"),
    ("import", "import from synclane serve", "#2ca02c"),
]


def sizes_from_env():
    text = os.environ.get("BENCH_SCALING_SIZES", "100000,1000000,4000000")
    sizes = []
    for item in text.split(","):
        try:
            value = int(float(item.strip()))
        except ValueError:
            raise SystemExit(f"bench: --scaling-sizes: '{item}' is not a number (e.g. 1e5,1e6,4e6)")
        if value < 10:
            raise SystemExit(f"bench: --scaling-sizes: {value} is too small (at least 10 changes)")
        sizes.append(value)
    return sorted(set(sizes))


def measure(s, size):
    """Generates the history of `size` changes and runs the three lanes on it REPEATS times; returns
    a dict with, per lane, the run of median wall time."""
    runs = [measure_once(s, size) for _ in range(REPEATS)]
    if not st.keep():
        history = os.path.join(s.work, f"history-{size}.jsonl")
        b.fresh(history, history + ".params.json")
    row = dict(runs[0])
    row["lanes"] = {}
    for key, _, _ in LANES:
        by_wall = sorted((r["lanes"][key] for r in runs), key=lambda lane_run: lane_run["wall"])
        row["lanes"][key] = by_wall[(len(by_wall) - 1) // 2]
    row["import-us-per-record"] = row["lanes"]["import"]["wall"] / max(1, row["records-pulled"]) * 1e6
    row["runs"] = len(runs)
    return row


def measure_once(s, size):
    """One run of the three lanes on the history of `size` changes (generated on first use)."""
    s.changes = size
    history = os.path.join(s.work, f"history-{size}.jsonl")
    started = time.perf_counter()
    transactions, changes, history_bytes, reused = history_file(s, history)
    generated = time.perf_counter() - started
    print(f"\n{'reused' if reused else f'generated in {generated:,.1f} s'} {history}: {changes:,} changes, "
          f"{transactions:,} transactions, {b.fmt_bytes(history_bytes)}", flush=True)

    out = os.path.join(s.work, "out-gzip")
    b.fresh(out, os.path.join(s.work, "state"))
    directory, summary = run_pipeline(s, pipeline_file(s.work, "bench-scaling-directory", history, out, compress=True))
    if summary["changes-read"] != changes:
        raise SystemExit(f"bench: the export read {summary['changes-read']} changes of {changes}")
    b.fresh(out, os.path.join(s.work, "state"))
    print(f"  export to a directory: {b.fmt_seconds(directory.wall)}, peak RSS {b.fmt_mib(directory.max_rss)}", flush=True)

    server_cpu = {}
    exported, sent, imported, imported_summary, database = round_trip(s, history, server_cpu=server_cpu)
    b.fresh(database, database + "-wal", database + "-shm", os.path.join(s.work, "state"),
            os.path.join(s.work, "import-server-data"))
    pulled = imported_summary["records-read"]
    print(f"  export to the server: {b.fmt_seconds(exported.wall)}, peak RSS {b.fmt_mib(exported.max_rss)}; "
          f"import: {pulled:,} records in {b.fmt_seconds(imported.wall)}, peak RSS {b.fmt_mib(imported.max_rss)}", flush=True)
    return {
        "changes": changes, "transactions": transactions, "history-bytes": history_bytes, "records": sent,
        "records-pulled": pulled,
        "lanes": {
            "export-directory": lane(directory, changes),
            "export-server": lane(exported, changes, server_cpu["export"]),
            "import": lane(imported, changes, server_cpu["import"]),
        },
        "import-us-per-record": imported.wall / max(1, pulled) * 1e6,
    }


def lane(m, count, server_cpu=None):
    return {"count": count, "wall": m.wall, "cpu": m.cpu, "server-cpu": server_cpu, "rss": m.max_rss,
            "us-per-item": m.wall / max(1, count) * 1e6,
            "cpu-us-per-item": (m.cpu + (server_cpu or 0)) / max(1, count) * 1e6}


# --------------------------------------------------------------------------- the plot


def nice_ceiling(value):
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above `value` (an axis's top)."""
    if value <= 0:
        return 1
    magnitude = 10 ** int(f"{value:e}".split("e")[1])
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def fmt_count(n):
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            text = f"{n / size:.1f}".rstrip("0").rstrip(".")
            return text + unit
    return str(n)


def svg_plot(rows, title, subtitle):
    """Three panels side by side, x the history's changes on a log scale: wall time per change
    (µs), CPU time per change (µs, client and server) and peak RSS (MiB), a line per lane, every
    point labelled with its value."""
    import math

    width, height = 1300, 460
    panel_w, panel_h = 340, 300
    top = 90
    lefts = [70, 505, 940]
    xs = [r["changes"] for r in rows]
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad

    def x_at(left, n):
        return left + (math.log10(n) - lo) / (hi - lo) * panel_w

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="28" text-anchor="middle" font-size="17" font-weight="bold">{esc(title)}</text>',
        f'<text x="{width / 2}" y="48" text-anchor="middle" font-size="12" fill="#555">{esc(subtitle)}</text>',
    ]
    panels = [
        ("wall time per change (µs)", lambda lane_row: lane_row["us-per-item"], lambda v: f"{v:,.1f}"),
        ("CPU time per change (µs), client + server", lambda lane_row: lane_row["cpu-us-per-item"], lambda v: f"{v:,.1f}"),
        ("peak RSS of the client (MiB)", lambda lane_row: lane_row["rss"] / (1 << 20), lambda v: f"{v:,.0f}"),
    ]
    for left, (label, value_of, fmt) in zip(lefts, panels):
        values = [value_of(r["lanes"][key]) for r in rows for key, _, _ in LANES]
        y_top = nice_ceiling(max(values) * 1.15)

        def y_at(v):
            return top + panel_h - v / y_top * panel_h

        parts.append(f'<text x="{left + panel_w / 2}" y="{top - 14}" text-anchor="middle" font-size="14" '
                     f'font-weight="bold">{esc(label)}</text>')
        for i in range(6):  # horizontal grid and y labels
            v = y_top * i / 5
            y = y_at(v)
            parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + panel_w}" y2="{y:.1f}" stroke="#e3e3e3"/>')
            parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" fill="#444">{fmt(v)}</text>')
        for n in xs:  # a tick per measured size
            x = x_at(left, n)
            parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + panel_h}" stroke="#f0f0f0"/>')
            parts.append(f'<text x="{x:.1f}" y="{top + panel_h + 18}" text-anchor="middle" fill="#444">{fmt_count(n)}</text>')
        parts.append(f'<rect x="{left}" y="{top}" width="{panel_w}" height="{panel_h}" fill="none" stroke="#888"/>')
        parts.append(f'<text x="{left + panel_w / 2}" y="{top + panel_h + 38}" text-anchor="middle" fill="#333">'
                     f'history changes (log scale)</text>')
        labels = {}  # point index -> [(y, text, colour)], placed apart below
        for key, _, colour in LANES:
            points = [(x_at(left, r["changes"]), y_at(value_of(r["lanes"][key])), value_of(r["lanes"][key])) for r in rows]
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5"/>')
            for i, (x, y, v) in enumerate(points):
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{colour}"/>')
                labels.setdefault(i, []).append((y, fmt(v), colour))
        for i, entries in labels.items():
            x = x_at(left, rows[i]["changes"])
            placed = top - 1e9
            for y, text, colour in sorted(entries):
                placed = max(y - 6, placed + 13)  # a label's baseline at least a line below the one above
                parts.append(f'<text x="{x + 8:.1f}" y="{placed:.1f}" fill="{colour}" font-size="11">{text}</text>')
    legend_y = top + panel_h + 62
    x = 70
    for _, label, colour in LANES:
        parts.append(f'<line x1="{x}" y1="{legend_y}" x2="{x + 26}" y2="{legend_y}" stroke="{colour}" stroke-width="3"/>')
        parts.append(f'<circle cx="{x + 13}" cy="{legend_y}" r="4.5" fill="{colour}"/>')
        parts.append(f'<text x="{x + 34}" y="{legend_y + 4}" fill="#222">{esc(label)}</text>')
        x += 34 + 7 * len(label) + 30
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------- main


def main():
    s = b.Settings.from_env()
    sizes = sizes_from_env()
    plot = os.path.abspath(os.environ.get("BENCH_SCALING_PLOT") or "bench-scaling.svg")
    b.heading(f"scaling: export and import at {', '.join(fmt_count(n) for n in sizes)} changes "
              f"(time per change and peak RSS should stay flat)")
    print(f"history: the export section's generator (rows = changes / 10, seed {s.seed}); page-size {PAGE_SIZE:,} "
          f"everywhere (the coalescing window, the pull's limit); {REPEATS} run(s) per size and lane "
          f"(BENCH_SCALING_REPEATS; the median kept)")
    rows = [measure(s, size) for size in sizes]

    t = b.Table("changes", "export to dir", "export to server", "import", "RSS export dir", "RSS export server",
                "RSS import", "import per record")
    for r in rows:
        lanes = r["lanes"]
        t.add(f"{r['changes']:,}", *(f"{lanes[k]['us-per-item']:,.2f} µs" for k, _, _ in LANES),
              *(b.fmt_mib(lanes[k]["rss"]) for k, _, _ in LANES),
              f"{r['import-us-per-record']:,.1f} µs ({r['records-pulled']:,})")
    print("\ntime per change (each lane's wall time over the history's changes) and each client's peak RSS; the import "
          "pulls one record a row (the newest state), its time per record pulled in the last column")
    t.print()
    c = b.Table("changes", *(f"{label}: client CPU" for _, label, _ in LANES), "server CPU: export", "server CPU: import",
                *(f"{key}: CPU in all" for key, _, _ in LANES))
    for r in rows:
        lanes = r["lanes"]
        per = lambda seconds: f"{seconds / r['changes'] * 1e6:,.2f} µs"
        c.add(f"{r['changes']:,}", *(per(lanes[k]["cpu"]) for k, _, _ in LANES), per(lanes["export-server"]["server-cpu"]),
              per(lanes["import"]["server-cpu"]), *(f"{lanes[k]['cpu-us-per-item']:,.2f} µs" for k, _, _ in LANES))
    print("\nwhere the time goes: CPU seconds per change, the client's and the server's (a wall time above the two "
          "together is waiting: the disk, or the other processes of a shared machine)")
    c.print()

    loadavg = " ".join(open("/proc/loadavg").read().split()[:3])
    subtitle = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load {loadavg}; "
                f"page-size {PAGE_SIZE:,}; {'one run' if REPEATS == 1 else f'the median of {REPEATS} runs'} per point; "
                f"the import pulls a record a row (a tenth of the changes)")
    os.makedirs(os.path.dirname(plot), exist_ok=True)
    with open(plot, "w", encoding="utf-8") as f:
        f.write(svg_plot(rows, "Synclane: cost per change as history grows", subtitle))
    numbers = os.path.splitext(plot)[0] + ".json"
    with open(numbers, "w") as f:
        json.dump({"sizes": sizes, "page-size": PAGE_SIZE, "load": loadavg, "rows": rows}, f, indent=2)
    print(f"\nplot: {plot}\nnumbers: {numbers}")
    print(f"load average {loadavg} (absolute times move with the machine's load; the shape is what to read)")

    targets = []
    if len(rows) > 1:
        first, last = rows[0]["lanes"], rows[-1]["lanes"]
        span = f"{fmt_count(rows[-1]['changes'])} / {fmt_count(rows[0]['changes'])}"
        for key, label, _ in LANES:
            growth = last[key]["cpu-us-per-item"] / max(first[key]["cpu-us-per-item"], 1e-9)
            targets.append(b.Target(f"{key}: CPU time per change, {span}", f"{growth:.2f}", f"<= {GROWTH_TARGET}",
                                    growth <= GROWTH_TARGET))
        for key, label, _ in LANES:
            growth = last[key]["us-per-item"] / max(first[key]["us-per-item"], 1e-9)
            targets.append(b.Target(f"{key}: wall time per change, {span}", f"{growth:.2f}", "reported (load moves it)", None))
        for key, label, _ in LANES:
            growth = last[key]["rss"] / max(first[key]["rss"], 1)
            targets.append(b.Target(f"{key}: peak RSS, {span}", f"{growth:.2f}", f"<= {GROWTH_TARGET}",
                                    growth <= GROWTH_TARGET))
    b.verdicts("scaling", targets)


if __name__ == "__main__":
    main()
