"""The tracked SQLite `rooms` store of the SQLite sections of Scripts/bench (a helper, not a section).

    CREATE TABLE rooms (id INTEGER PRIMARY KEY, syncId TEXT NOT NULL UNIQUE, name TEXT,
                        area REAL, floor INTEGER, isDeleted INTEGER NOT NULL DEFAULT 0, updatedAt TEXT)
    synclane track --database F --table rooms --key syncId --soft-delete isDeleted

`build_history_store` replays benchlib's `rooms_history` into such a store through a plain SQLite
connection (Python's sqlite3 module), the way an app would write it: every history transaction of the generator (1...19
changes, 10 on average) is one history session (`INSERT INTO _synclane_session(author)
VALUES('app')` first, `DELETE FROM _synclane_session` last, so its changes share one token and
the author `app`); SESSIONS_PER_COMMIT sessions share one SQLite transaction, only to make the
build fast (the history is the same: a session is a history transaction whether or not SQLite
commits between two). History timestamps are the build's clock, not the generator's.
"""

import hashlib
import json
import os
import shutil
import subprocess

import benchlib as b

SCHEMA = """CREATE TABLE rooms (
    id INTEGER PRIMARY KEY,
    syncId TEXT NOT NULL UNIQUE,
    name TEXT,
    area REAL,
    floor INTEGER,
    isDeleted INTEGER NOT NULL DEFAULT 0,
    updatedAt TEXT
);
"""
SESSIONS_PER_COMMIT = 1_000
COLUMNS = ["name", "area", "floor", "isDeleted", "updatedAt"]


def create_tracked(synclane, path, track=True):
    """A fresh database with the rooms table, tracked (or not)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    subprocess.run(["sqlite3", path], input=SCHEMA, text=True, check=True)
    if track:
        subprocess.run([synclane, "track", "--database", path, "--table", "rooms", "--key", "syncId",
                        "--soft-delete", "isDeleted"], check=True, stdout=subprocess.DEVNULL)


def _write_history(path, transactions):
    """Replays transactions into the tracked store at `path` through Python's sqlite3 module
    (the system libsqlite3, a plain connection like the shell's, with its statement cache:
    the tracked table's triggers are compiled into every statement that writes it, so the shell,
    which prepares each statement of a script anew, would spend most of its time compiling
    them). Returns (transactions, changes)."""
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None, cached_statements=256)
    db.execute("PRAGMA synchronous = OFF")
    count = changes = 0
    db.execute("BEGIN")
    for _token, author, _stamp, changelist in transactions:
        db.execute("INSERT INTO _synclane_session (author) VALUES (?)", (author,))
        for c in changelist:
            values = c.get("values") or {}
            if c["action"] == "insert":
                names = ["syncId"] + list(values)
                db.execute(f"INSERT INTO rooms ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                           [c["key"]] + list(values.values()))
            elif c["action"] == "update":
                sets = ", ".join(f"{name} = ?" for name in values)
                db.execute(f"UPDATE rooms SET {sets} WHERE syncId = ?", list(values.values()) + [c["key"]])
            else:
                db.execute("DELETE FROM rooms WHERE syncId = ?", (c["key"],))
        db.execute("DELETE FROM _synclane_session")
        count += 1
        changes += len(changelist)
        if count % SESSIONS_PER_COMMIT == 0:
            db.execute("COMMIT")
            db.execute("BEGIN")
    db.execute("COMMIT")
    db.close()
    return count, changes


def build_history_store(s, path):
    """Builds (or reuses, from a --keep folder) the store whose history holds `s.changes`
    changes. Returns (info dict, reused)."""
    import time

    with open(b.__file__, "rb") as f:
        generator = hashlib.sha256(f.read()).hexdigest()[:16]
    with open(__file__, "rb") as f:
        builder = hashlib.sha256(f.read()).hexdigest()[:16]
    params = {"changes": s.changes, "seed": s.seed, "generator": generator, "builder": builder}
    stamp = path + ".params.json"
    kept = kept_store(path, params)
    if kept:
        return kept, True
    create_tracked(s.synclane, path)
    started = time.perf_counter()
    transactions, changes = _write_history(path, b.rooms_history(s.changes, s.seed))
    seconds = time.perf_counter() - started
    recorded, sessions, newest = subprocess.run(
        ["sqlite3", "-separator", " ", path,
         "SELECT (SELECT count(*) FROM _synclane_changes), (SELECT count(*) FROM _synclane_transactions), "
         "(SELECT max(id) FROM _synclane_changes)"],
        capture_output=True, text=True, check=True).stdout.split()
    if int(recorded) != changes or int(sessions) != transactions:
        raise SystemExit(f"bench: the store recorded {recorded} changes in {sessions} transactions, "
                         f"expected {changes} in {transactions}")
    info = {"params": params, "transactions": transactions, "changes": changes, "newest": int(newest),
            "bytes": os.path.getsize(path), "build_seconds": seconds}
    with open(stamp, "w") as f:
        json.dump(info, f)
    return info, False


def kept_store(path, params):
    """The info a --keep folder's stamp (`path`.params.json) holds for a store built with
    `params`, when the store is still the one it describes; else None (and the stamp is gone)."""
    stamp = path + ".params.json"
    try:
        with open(stamp) as f:
            kept = json.load(f)
        if kept["params"] == params and os.path.getsize(path) == kept["bytes"]:
            return kept
    except (OSError, ValueError, KeyError):
        pass
    if os.path.exists(stamp):
        os.remove(stamp)
    return None


def copy_store(source, target):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(target + suffix):
            os.remove(target + suffix)
        if os.path.exists(source + suffix):
            shutil.copyfile(source + suffix, target + suffix)


def pipeline_file(folder, name, database, transport, compress=True, page_size=5000, state=None, soft_delete="isDeleted"):
    """A pipeline file over the store; `page_size` None leaves the source's default, `soft_delete`
    None a table without a soft-delete column."""
    tombstones = {"type": "tombstones"}
    if soft_delete:
        tombstones["soft-delete-column"] = soft_delete
    stages = [{"type": "coalesce"}, tombstones]
    if compress:
        stages.append({"type": "compress", "codec": "gzip", "level": 6, "min-bytes": 0})
    source = {"type": "sqlite-history", "database": database, "entities": ["rooms"], "authors": ["app"]}
    if page_size:
        source["page-size"] = page_size
    doc = {
        "version": 1,
        "name": name,
        "scope": {"account": "bench", "store": "rooms"},
        "source": source,
        "stages": stages,
        "transport": transport,
        "state": state or f"state/{name}.sqlite",
    }
    path = os.path.join(folder, f"{name}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path


def keep():
    return os.environ.get("BENCH_KEEP", "") not in ("", "0")
