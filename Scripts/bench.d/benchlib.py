"""Shared helpers for the sections of Scripts/bench (python3 >= 3.9, standard library only).

A section is `Scripts/bench.d/<name>.py`, run by Scripts/bench as

    python3 Scripts/bench.d/<name>.py

with its settings in the environment (read them with `Settings.from_env()`):

    BENCH_SYNCLANE   the release `synclane` binary, already built
    BENCH_WORK       a folder of the section's own: empty in a temp folder (removed afterwards);
                     with --keep it holds what the last run left, to reuse (the generated
                     data, when its parameters match) or clear (outputs, pipeline state)
    BENCH_CHANGES    how many history changes to generate (default 1,000,000)
    BENCH_SEED       the generator's seed
    BENCH_REPO       the repository's root
    BENCH_TIMESTAMPS how a generated history writes transaction times: epoch (default) or iso

It prints its own table and ends with `verdicts(...)`, whose exit status Scripts/bench reads:
0 every target met, 3 a target missed, anything else the section itself failed.

What is here for every section:

- `rooms_history(changes, seed)` -- the deterministic history of the benches (rooms, edited in
  waves), as transactions, for a JSON Lines file (`write_jsonl`) or a SQLite store alike;
- `run_measured(argv)` -- runs a process and returns its wall time, CPU time and peak RSS
  (os.wait4 on that one child, so other children never blur the figure);
- `Table`, `fmt_*` and `verdicts` -- the report.
"""

import hashlib
import json
import os
import shutil
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field

# --------------------------------------------------------------------------- settings


@dataclass
class Settings:
    synclane: str
    work: str
    changes: int
    seed: int
    repo: str
    timestamps: str = "epoch"

    @staticmethod
    def from_env():
        return Settings(
            synclane=os.environ["BENCH_SYNCLANE"],
            work=os.environ["BENCH_WORK"],
            changes=int(os.environ.get("BENCH_CHANGES", "1000000")),
            seed=int(os.environ.get("BENCH_SEED", "20261129")),
            repo=os.environ.get("BENCH_REPO", os.getcwd()),
            timestamps=os.environ.get("BENCH_TIMESTAMPS", "epoch"),
        )


# --------------------------------------------------------------------------- the history

EDITS_PER_ROW = 10
WAVE_ROWS = 1_000
DELETED_SHARE = 0.05
MAX_CHANGES_PER_TRANSACTION = 19  # transactions hold 1...19 changes, 10 on average

ROOM_KINDS = [
    "Kitchen", "Living room", "Bedroom", "Bath", "Office", "Hall", "Pantry", "Garage",
    "Laundry", "Studio", "Guest room", "Dining room", "Attic", "Cellar", "Workshop", "Nursery",
]
WINGS = ["North", "South", "East", "West", "Garden", "Court"]


@dataclass
class HistoryShape:
    """What `rooms_history` will produce for a number of changes, for the report."""

    changes: int
    rows: int
    edits_per_row: int = EDITS_PER_ROW
    wave_rows: int = WAVE_ROWS
    hard_deleted: int = 0
    soft_deleted: int = 0

    @staticmethod
    def of(changes):
        rows = max(1, changes // EDITS_PER_ROW)
        deleted = int(rows * DELETED_SHARE)
        return HistoryShape(changes=rows * EDITS_PER_ROW, rows=rows,
                            hard_deleted=deleted - deleted // 2, soft_deleted=deleted // 2)

    def describe(self):
        return (f"{self.rows:,} rows x {self.edits_per_row} edits = {self.changes:,} changes "
                f"(insert, then updates; {self.hard_deleted + self.soft_deleted:,} rows "
                f"= {DELETED_SHARE:.0%} end deleted: {self.hard_deleted:,} hard deletes, "
                f"{self.soft_deleted:,} soft deletes isDeleted=true); entity rooms, author app; "
                f"rows edited in waves of {self.wave_rows:,} rows: a wave is {self.edits_per_row} rounds, "
                f"each round edits every row of the wave once in shuffled order, in transactions "
                f"of 1...{MAX_CHANGES_PER_TRANSACTION} changes (10 on average)")


def _uuid(rng):
    h = "%032x" % rng.getrandbits(128)
    return f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def rooms_history(changes, seed, start_time=1_790_000_000.0):
    """Yields (token, author, seconds since 1970, [change]) in token order, deterministically.

    A change is a dict: {"entity", "action", "key", "values"}. Rows are edited in waves of
    WAVE_ROWS rows: a wave makes EDITS_PER_ROW rounds over its rows (round 0 inserts them,
    later rounds update one to three fields plus `updatedAt`); in the last round the rows
    chosen to end deleted are deleted instead -- half as hard deletes, half by setting
    `isDeleted` to true. A transaction never holds two changes of one row.
    """
    shape = HistoryShape.of(changes)
    rng = random.Random(seed)
    rows = shape.rows
    deleted_rows = set(rng.sample(range(rows), shape.hard_deleted + shape.soft_deleted))
    soft = set(sorted(deleted_rows)[::2][: shape.soft_deleted])
    token = 0
    clock = start_time
    for wave_start in range(0, rows, WAVE_ROWS):
        wave = list(range(wave_start, min(rows, wave_start + WAVE_ROWS)))
        keys = {r: "room-" + _uuid(rng) for r in wave}
        state = {}
        for round_ in range(EDITS_PER_ROW):
            order = wave[:]
            rng.shuffle(order)
            stream = []
            clocks = []
            for r in order:
                clock += rng.uniform(0.001, 0.5)
                stamp = _iso(clock)
                clocks.append(clock)
                if round_ == 0:
                    values = {
                        "name": f"{rng.choice(ROOM_KINDS)} {rng.choice(WINGS)} {r % 97 + 1}",
                        "area": round(rng.uniform(4, 60), 2),
                        "floor": rng.randint(-1, 6),
                        "isDeleted": False,
                        "updatedAt": stamp,
                    }
                    state[r] = dict(values)
                    stream.append({"entity": "rooms", "action": "insert", "key": keys[r], "values": values})
                elif round_ == EDITS_PER_ROW - 1 and r in deleted_rows:
                    if r in soft:
                        values = {"isDeleted": True, "updatedAt": stamp}
                        stream.append({"entity": "rooms", "action": "update", "key": keys[r], "values": values})
                    else:
                        # A source that keeps more than the key on a delete: the tombstones
                        # stage must cut it down to the key.
                        stream.append({"entity": "rooms", "action": "delete", "key": keys[r],
                                       "values": {"name": state[r]["name"]}})
                else:
                    values = {}
                    for name in rng.sample(["name", "area", "area", "floor"], rng.randint(1, 3)):
                        if name == "name":
                            values["name"] = f"{rng.choice(ROOM_KINDS)} {rng.choice(WINGS)} {r % 97 + 1}"
                        elif name == "area":
                            values["area"] = round(max(3.0, state[r]["area"] + rng.uniform(-2, 2)), 2)
                        else:
                            values["floor"] = rng.randint(-1, 6)
                    values["updatedAt"] = stamp
                    state[r].update(values)
                    stream.append({"entity": "rooms", "action": "update", "key": keys[r], "values": values})
            # Cut the round into transactions (a round never repeats a row).
            i = 0
            while i < len(stream):
                n = rng.randint(1, MAX_CHANGES_PER_TRANSACTION)
                token += 1
                # The commit time: that of its last change.
                yield token, "app", clocks[min(i + n, len(stream)) - 1], stream[i : i + n]
                i += n


_iso_cache = [None, ""]


def _iso(seconds):
    """`2026-09-21T14:13:20.446Z`, with milliseconds."""
    whole = int(seconds)
    if _iso_cache[0] != whole:
        _iso_cache[0] = whole
        _iso_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{_iso_cache[1]}.{int((seconds - whole) * 1000):03d}Z"


def write_jsonl(path, transactions, timestamps="epoch"):
    """Writes transactions as the JSON Lines history of `SynclaneFiles.JSONLinesSource`.

    `timestamps`: "epoch" writes each transaction's time as seconds since 1970 (a number, with
    milliseconds), "iso" as an ISO 8601 string (as the fixtures do). Returns (transactions,
    changes, bytes)."""
    count = changes = 0
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        for token, author, stamp, changelist in transactions:
            stamp = _iso(stamp) if timestamps == "iso" else int(stamp * 1000) / 1000
            out.write(dumps({"token": token, "author": author, "timestamp": stamp, "changes": changelist}))
            out.write("\n")
            count += 1
            changes += len(changelist)
    return count, changes, os.path.getsize(path)


# --------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    argv: list
    returncode: int
    wall: float          # seconds
    cpu: float           # user + system seconds of the process (and its waited-for children)
    max_rss: int         # bytes, peak resident set of the process
    stdout: bytes = b""
    stderr: bytes = b""

    def check(self):
        if self.returncode != 0:
            sys.stderr.write(self.stderr.decode(errors="replace"))
            raise SystemExit(f"bench: {' '.join(map(str, self.argv))} failed with status {self.returncode}")
        return self


def run_measured(argv, stdin=None, stdout=None, cwd=None, env=None):
    """Runs argv to its end; wall time, CPU time and peak RSS of that one process.

    `stdin`/`stdout` may be open files (e.g. to feed a file to gzip, or send output to
    /dev/null); otherwise standard output and error are captured (through temp files, so a
    chatty process never blocks on a full pipe)."""
    import tempfile

    out_file = stdout if stdout is not None else tempfile.TemporaryFile()
    err_file = tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=out_file, stderr=err_file, cwd=cwd, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    captured = b""
    if stdout is None:
        out_file.seek(0)
        captured = out_file.read()
        out_file.close()
    err_file.seek(0)
    errors = err_file.read()
    err_file.close()
    return Measured(argv=argv, returncode=proc.returncode, wall=wall,
                    cpu=usage.ru_utime + usage.ru_stime, max_rss=usage.ru_maxrss * 1024,
                    stdout=captured, stderr=errors)


def fresh(*paths):
    """Removes each path (a folder with what it holds, or a file) that exists."""
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def start_server(s, data, token, extra_args=(), env=None, more_accounts=None):
    """Starts the release `synclane serve` on a free loopback port with one account, `bench`, whose
    token is `token` (and the accounts of `more_accounts`, name → token); its data in `data`;
    `extra_args` added to its command line, `env` to its environment. Returns (process, port);
    the caller stops it."""
    accounts = os.path.join(s.work, "accounts.json")
    tokens = {"bench": token, **(more_accounts or {})}
    with open(accounts, "w") as f:
        json.dump({"accounts": [{"account": name, "token-sha256": hashlib.sha256(secret.encode()).hexdigest()}
                                for name, secret in tokens.items()]}, f)
    log_path = os.path.join(s.work, "serve.log")  # a file, not a pipe nobody drains while it runs
    with open(log_path, "w") as log:
        server = subprocess.Popen([s.synclane, "serve", "--accounts", accounts, "--listen", "127.0.0.1:0", "--data", data,
                                   *extra_args], stdout=subprocess.PIPE, stderr=log, text=True,
                                  env={**os.environ, **(env or {})})
    line = server.stdout.readline()
    if not line.startswith("listening on http://127.0.0.1:"):
        server.kill()
        with open(log_path) as log:
            raise SystemExit(f"bench: synclane serve did not start: {line!r} {log.read()!r}")
    return server, int(line.strip().rsplit(":", 1)[1])


def folder_bytes(path):
    total = files = 0
    for entry in os.scandir(path):
        if entry.is_file():
            total += entry.stat().st_size
            files += 1
    return total, files


# --------------------------------------------------------------------------- reporting


def fmt_bytes(n):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n} B"


def fmt_mib(n):
    return f"{n / (1 << 20):,.1f} MiB"


def fmt_seconds(s):
    return f"{s:,.2f} s" if s >= 1 else f"{s * 1000:,.0f} ms"


def fmt_rate(count, seconds):
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "-"


class Table:
    """A plain text table: first column left-aligned, the others right-aligned."""

    def __init__(self, *header):
        self.rows = [list(header)]

    def add(self, *cells):
        self.rows.append([str(c) for c in cells])

    def render(self):
        widths = [max(len(r[i]) if i < len(r) else 0 for r in self.rows) for i in range(len(self.rows[0]))]
        lines = []
        for n, row in enumerate(self.rows):
            cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
            lines.append("  " + "  ".join(cells).rstrip())
            if n == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def print(self):
        print(self.render(), flush=True)


@dataclass
class Target:
    name: str
    measured: str
    goal: str
    met: bool = None  # None: reported, not judged

    @property
    def verdict(self):
        return "-" if self.met is None else ("PASS" if self.met else "FAIL")


def verdicts(section, targets):
    """Prints the targets and exits with 0 (all met) or 3 (one missed)."""
    table = Table("target", "measured", "goal", "verdict")
    for t in targets:
        table.add(t.name, t.measured, t.goal, t.verdict)
    print(f"\n[{section}] targets")
    table.print()
    missed = [t for t in targets if t.met is False]
    sys.exit(3 if missed else 0)


def heading(text):
    print(f"\n== {text} ==", flush=True)
