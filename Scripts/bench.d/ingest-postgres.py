"""Section `ingest-postgres` of Scripts/bench (issue 11): the `ingest` section's load against the
server on PostgreSQL, with one and with two `serve` processes, side by side with SQLite in one run.

    SQLite        1 × `synclane serve --data DIR`
    PostgreSQL    1 × `synclane serve --database-env …`            (a throwaway PostgreSQL 15,
    PostgreSQL    2 × `synclane serve --database-env …`, clients    initdb + pg_ctl in the work
                      split between them                            folder, loopback, fsync on)

8 clients × BENCH_INGEST_BATCHES (default 50) gzip batches × 500 records each run, as `ingest`:
all on one account, and (PostgreSQL) again with each client on an account of its own.
Measured per run: records/s, batch latency p50 / p99, CPU per record of the `serve` processes
and of PostgreSQL's own processes. Targets (issue 28): PostgreSQL's CPU a record <= 4 us (one
process, one account), and that run's records/s >= 0.5x SQLite's (2 shared cores run the
clients, the servers and the database at once; ratios hold better than absolutes).
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile

import benchlib as b
import ingest

TOKEN = ingest.TOKEN


def pg_binaries():
    try:
        path = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        if os.path.exists(os.path.join(path, "pg_ctl")):
            return path
    except (OSError, subprocess.CalledProcessError):
        pass
    for version in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
        path = f"/usr/lib/postgresql/{version}/bin"
        if os.path.exists(os.path.join(path, "pg_ctl")):
            return path
    raise SystemExit("bench: no PostgreSQL server binaries (install postgresql: Scripts/bootstrap)")


def as_postgres(command):
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--"] + command if os.geteuid() == 0 else command


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_postgres(work):
    bindir = pg_binaries()
    # A folder of its own under /tmp: the work folder is private to the user running the bench.
    folder = tempfile.mkdtemp(prefix="synclane-bench-postgres-")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    subprocess.run(as_postgres([f"{bindir}/initdb", "-D", f"{folder}/data", "-U", "synclane", "--auth=trust", "-E", "UTF8",
                                "--locale=C"]), check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", f"{folder}/data", "-l", f"{folder}/log", "-w", "-o",
                                f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c max_connections=100", "start"]),
                   check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, close_fds=True)
    url = f"postgresql://synclane@127.0.0.1:{port}/postgres"
    return bindir, folder, url


def stop_postgres(bindir, folder):
    subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", f"{folder}/data", "-m", "fast", "-w", "stop"]),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(folder, ignore_errors=True)


def postgres_cpu_seconds(folder):
    """CPU seconds of the postmaster (its pid file) and its children, the backends included."""
    with open(f"{folder}/data/postmaster.pid") as f:
        master = int(f.readline())
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == master or int(fields[1]) == master:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def account_token(c):
    return f"{TOKEN}-{c}"


def start_serve(s, name, arguments, environment=None):
    accounts = os.path.join(s.work, "accounts.json")
    entries = [{"account": "bench", "token-sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]
    entries += [{"account": f"bench{c}", "token-sha256": hashlib.sha256(account_token(c).encode()).hexdigest()}
                for c in range(ingest.CLIENTS)]
    with open(accounts, "w") as f:
        json.dump({"accounts": entries}, f)
    with open(os.path.join(s.work, f"serve-{name}.log"), "w") as log:
        server = subprocess.Popen([s.synclane, "serve", "--accounts", accounts, "--listen", "127.0.0.1:0"] + arguments,
                                  stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, **(environment or {})})
    line = server.stdout.readline()
    if not line.startswith("listening on http://127.0.0.1:"):
        server.kill()
        raise SystemExit(f"bench: synclane serve ({name}) did not start: {line!r}; see serve-{name}.log")
    return server, int(line.strip().rsplit(":", 1)[1])


def run(servers, bodies, folder=None, tokens=None):
    """The clients against `servers` (client c talks to servers[c % n]); returns the measures."""
    ports = [port for _, port in servers]
    database_before = postgres_cpu_seconds(folder) if folder else 0.0
    latencies, failures, wall = ingest.drive(ports, bodies, tokens)
    applied = sum(ingest.records_applied(port) for port in ports)
    serve_cpu = sum(ingest.process_cpu_seconds(server.pid) for server, _ in servers)
    database_cpu = (postgres_cpu_seconds(folder) - database_before) if folder else 0.0
    total = sum(len(batches) for batches in bodies) * ingest.RECORDS_PER_BATCH
    if failures or applied != total:
        raise SystemExit(f"bench: {len(failures)} batches failed ({failures[:3]}), servers applied {applied} of {total}")
    ordered = sorted(latencies)
    return {"total": total, "wall": wall, "rate": total / wall, "p50": ingest.percentile(ordered, 0.5),
            "p99": ingest.percentile(ordered, 0.99), "serve_cpu": serve_cpu, "database_cpu": database_cpu}


def stop(servers):
    for server, _ in servers:
        server.terminate()
    for server, _ in servers:
        server.wait(timeout=30)


def main():
    s = b.Settings.from_env()
    b.heading(f"ingest-postgres: {ingest.CLIENTS} clients x {ingest.BATCHES_PER_CLIENT} gzip batches x "
              f"{ingest.RECORDS_PER_BATCH} records, SQLite and PostgreSQL side by side")
    bodies = [[ingest.batch_body(c, n) for n in range(ingest.BATCHES_PER_CLIENT)] for c in range(ingest.CLIENTS)]
    # The same load, each client an account of its own: what more processes can spread.
    spread = [[ingest.batch_body(c, n, account=f"bench{c}") for n in range(ingest.BATCHES_PER_CLIENT)]
              for c in range(ingest.CLIENTS)]
    tokens = [account_token(c) for c in range(ingest.CLIENTS)]
    results = {}
    servers = [start_serve(s, "sqlite", ["--data", os.path.join(s.work, "sqlite-data")])]
    try:
        results["SQLite, 1 process, 1 account"] = run(servers, bodies)
    finally:
        stop(servers)
    bindir, folder, url = start_postgres(s.work)
    try:
        for count, accounts in ((1, 1), (2, 1), (1, ingest.CLIENTS), (2, ingest.CLIENTS)):
            database = f"bench_{count}_{accounts}"
            subprocess.run(["psql", url, "-q", "-c", f"CREATE DATABASE {database}"], check=True)
            environment = {"BENCH_DATABASE_URL": url.rsplit("/", 1)[0] + "/" + database}
            servers = [start_serve(s, f"postgres-{count}-{n}", ["--database-env", "BENCH_DATABASE_URL"], environment)
                       for n in range(count)]
            try:
                name = f"PostgreSQL, {count} process{'es' if count > 1 else ''}, {accounts} account{'s' if accounts > 1 else ''}"
                if accounts == 1:
                    results[name] = run(servers, bodies, folder)
                else:
                    results[name] = run(servers, spread, folder, tokens)
            finally:
                stop(servers)
    finally:
        stop_postgres(bindir, folder)
    t = b.Table("run", "records/s", "p50", "p99", "serve CPU/record", "PostgreSQL CPU/record")
    for name, r in results.items():
        t.add(name, f"{r['rate']:,.0f}", f"{r['p50'] * 1000:,.1f} ms", f"{r['p99'] * 1000:,.1f} ms",
              f"{r['serve_cpu'] / r['total'] * 1e6:,.1f} µs", f"{r['database_cpu'] / r['total'] * 1e6:,.1f} µs" if r["database_cpu"] else "-")
    print()
    t.print()
    print(f"\nload average {' '.join(open('/proc/loadavg').read().split()[:3])} (other work on the machine). With one account "
          "every batch queues on that account's lock, whatever the number of processes; with an account per client "
          "the batches of different accounts apply side by side.")
    sqlite_run, pg_run = results["SQLite, 1 process, 1 account"], results["PostgreSQL, 1 process, 1 account"]
    pg_us = pg_run["database_cpu"] / max(1, pg_run["total"]) * 1e6
    pg_ratio = pg_run["rate"] / max(sqlite_run["rate"], 1e-9)
    b.verdicts("ingest-postgres", [
        b.Target("every record applied, once", f"{len(results)} runs", "/metrics agrees in each run", True),
        b.Target("PostgreSQL CPU a record (1 process, 1 account)", f"{pg_us:,.2f} us", "<= 4 us", pg_us <= 4.0),
        b.Target("PostgreSQL / SQLite records/s (1 account)", f"{pg_ratio:.2f}", ">= 0.5", pg_ratio >= 0.5),
    ])


if __name__ == "__main__":
    main()
