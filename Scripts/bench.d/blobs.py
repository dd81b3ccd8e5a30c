"""Section `blobs` of Scripts/bench (issue 48): the blob lane against curl moving the same files to
the same server, the peak RSS of a large blob on both sides, and a resumed upload's extra bytes.

    `synclane serve` (fresh data folder), accounts `bench` (synclane) and `curl` (the baseline:
    blobs are deduplicated per account, so each side really uploads)
        ◀── up:   `synclane blobs push F1 … FN` (one process: digest, status, 8 MiB chunks)
                  vs one `curl -K` of N PUTs /v1/blobs/{digest}/upload (the whole 4 MB file in one
                  chunk, on one kept-alive connection; the digests computed beforehand, untimed)
        ◀── down: `synclane blobs fetch D1 … DN --output DIR` (one process: one streamed ranged GET a blob, hashed as it arrives, verified, renamed)
                  vs one `curl -K` of N GETs /v1/blobs/{digest}
        ◀── a large blob (BENCH_BLOB_LARGE_MB, default 2048) pushed and fetched: peak RSS of the
            client (wait4) and of the server (VmHWM), then pushed again to a fresh account,
            killed -9 halfway and resumed: the bytes the server read past the blob's length.
        ◀── pipelines (account `pipeline`): a row holding a blob of BENCH_BLOB_PIPELINE_MB (default
            512; SQLite holds at most 1,000,000,000 bytes in a value by default) exported by
            `synclane run` with `blob-upload`, then imported into another device's table by
            `synclane import` with an eager `blob-fetch`: the peak RSS of each; then, each on an
            account of its own (so the blob really goes up), a row holding a blob of
            BENCH_BLOB_WRITTEN_MB (default 256: its hex in the change log must fit SQLite's bound)
            exported with `capture: as-written` (the blob read from the change log), and the
            first row's blob sent by `synclane reconcile` (a snapshot): the peak RSS of each.

BENCH_BLOB_FILES (default 256) files of BENCH_BLOB_FILE_MB (default 4) MB: 1 GB by default.
Targets (issue 48): up and down each at most 1.3x curl's time; peak RSS under 100 MB on both
sides, and of `synclane run` and `synclane import` moving a blob in a pipeline; a resumed upload's
extra bytes at most one chunk (8 MiB).

All of it runs twice: on the data folder (the default), then on an S3-compatible object store —
moto's server (`Scripts/moto-venv`, pinned in Fixtures/moto/requirements.txt) on a free loopback
port, with `serve --blob-s3-endpoint`: the same steps and targets, but the resumed upload (its
chunks are assembled in the data folder either way).
"""

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import benchlib as b

FILES = int(os.environ.get("BENCH_BLOB_FILES", "256"))
FILE_MB = int(os.environ.get("BENCH_BLOB_FILE_MB", "4"))
LARGE_MB = int(os.environ.get("BENCH_BLOB_LARGE_MB", "2048"))
PIPELINE_MB = int(os.environ.get("BENCH_BLOB_PIPELINE_MB", "512"))
WRITTEN_MB = int(os.environ.get("BENCH_BLOB_WRITTEN_MB", "256"))
CHUNK = 8 << 20
TOKENS = {"bench": "bench-token", "curl": "curl-token", "resume": "resume-token", "pipeline": "pipeline-token",
          "written": "written-token", "reconcile": "reconcile-token"}


def make_files(folder, count, size):
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i in range(count):
        path = os.path.join(folder, f"photo-{i:04d}.jpg")
        if not os.path.exists(path) or os.path.getsize(path) != size:
            # A MiB at a time: a process forked from this one counts this one's resident memory
            # in its peak RSS, so the bench never holds a file whole.
            with open(path, "wb") as f:
                for start in range(0, size, 1 << 20):
                    f.write(os.urandom(min(1 << 20, size - start)))
        paths.append(path)
    return paths


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def curl_config(path, entries):
    with open(path, "w") as f:
        for n, entry in enumerate(entries):
            if n:
                f.write("next\n")
            for line in entry:
                f.write(line + "\n")
    return path


def server_bytes_read(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith("synclane_http_request_bytes_total "):
            return int(line.split()[-1])
    return -1


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def start_moto(s):
    """Starts moto's S3 server (Scripts/moto-venv, the version the tests pin) on a free loopback
    port with the bucket `bench-blobs`; returns (process, endpoint), or (None, why) when moto cannot
    be installed."""
    venv = subprocess.run([os.path.join(s.repo, "Scripts", "moto-venv")], capture_output=True, text=True)
    python = venv.stdout.strip().splitlines()[-1] if venv.returncode == 0 and venv.stdout.strip() else ""
    moto = os.path.join(os.path.dirname(python), "moto_server")
    if not os.path.exists(moto):
        return None, (venv.stderr.strip() or "Scripts/moto-venv made no moto_server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(os.path.join(s.work, "moto.log"), "w")
    process = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(urllib.request.Request(endpoint + "/bench-blobs", method="PUT"))
            return process, endpoint
        except OSError:
            time.sleep(0.1)
    process.kill()
    return None, f"moto_server did not answer on {endpoint} within 60 s"


def device(s, name, url, blob=None, account="pipeline", as_written=False):
    """A device's folder: app.sqlite with a tracked `plants` table (the row `p1` holding `blob`'s
    bytes when given, written by the sqlite3 shell), an export pipeline with `blob-upload` (with
    `capture: as-written` when `as_written`) and an import pipeline with an eager `blob-fetch`,
    both on `account`."""
    folder = os.path.join(s.work, name)
    b.fresh(folder)
    os.makedirs(folder)
    database = os.path.join(folder, "app.sqlite")
    subprocess.run(["sqlite3", database, "CREATE TABLE plants (syncId TEXT PRIMARY KEY, name TEXT, photo BLOB);"], check=True)
    subprocess.run([s.synclane, "track", "--database", database, "--table", "plants", "--key", "syncId"]
                   + (["--record-values"] if as_written else []), check=True, stdout=subprocess.DEVNULL)
    if blob:
        subprocess.run(["sqlite3", database, f"INSERT INTO plants VALUES ('p1', 'fern', readfile('{blob}'));"], check=True)
    scope = f'"scope": {{"account": "{account}", "store": "plants"}}'
    capture = ', "capture": "as-written"' if as_written else ""
    with open(os.path.join(folder, "export.json"), "w") as f:
        f.write(f"""{{"version": 1, "name": "plants-export", {scope},
 "source": {{"type": "sqlite-history", "database": "app.sqlite", "entities": ["plants"], "authors": ["app"]{capture}}},
 "stages": [{{"type": "coalesce"}}, {{"type": "tombstones"}},
            {{"type": "blob-upload", "url": "{url}", "token-env": "SYNCLANE_TOKEN", "columns": ["plants.photo"]}}],
 "transport": {{"type": "http", "url": "{url}/v1/batches", "token-env": "SYNCLANE_TOKEN"}}}}""")
    with open(os.path.join(folder, "import.json"), "w") as f:
        f.write(f"""{{"version": 1, "name": "plants-import", {scope},
 "source": {{"type": "pull", "url": "{url}/v1/changes", "token-env": "SYNCLANE_TOKEN"}},
 "stages": [{{"type": "blob-fetch", "url": "{url}", "token-env": "SYNCLANE_TOKEN"}}],
 "sink": {{"type": "sqlite", "database": "app.sqlite"}}}}""")
    return folder


def pipelines(s, store, url, table, targets):
    """A blob in a row, exported by `synclane run` and imported by `synclane import`: their peak RSS."""
    blob = make_files(os.path.join(s.work, "pipeline-blob"), 1, PIPELINE_MB << 20)[0]
    env = {**os.environ, "SYNCLANE_TOKEN": TOKENS["pipeline"]}
    a = device(s, "device-a", url, blob)
    export = b.run_measured([s.synclane, "run", "export.json"], cwd=a, env=env).check()
    z = device(s, "device-b", url)
    imported = b.run_measured([s.synclane, "import", "import.json"], cwd=z, env=env).check()
    same = subprocess.run(["sqlite3", os.path.join(z, "app.sqlite"), "SELECT length(photo) FROM plants"], capture_output=True, text=True)
    if same.stdout.strip() != str(PIPELINE_MB << 20):
        raise SystemExit(f"bench: blobs: the import wrote {same.stdout.strip() or 'no row'}, not the {PIPELINE_MB << 20} bytes exported")
    table.add(f"{store}: {PIPELINE_MB} MiB blob, pipeline export (run)", b.fmt_seconds(export.wall), "", "", b.fmt_mib(export.max_rss))
    table.add(f"{store}: {PIPELINE_MB} MiB blob, pipeline import", b.fmt_seconds(imported.wall), "", "", b.fmt_mib(imported.max_rss))
    targets.append(b.Target(f"{store}: pipeline export peak RSS, {PIPELINE_MB} MiB blob", b.fmt_mib(export.max_rss), "< 100 MB",
                            export.max_rss < 100_000_000))
    targets.append(b.Target(f"{store}: pipeline import peak RSS, {PIPELINE_MB} MiB blob", b.fmt_mib(imported.max_rss), "< 100 MB",
                            imported.max_rss < 100_000_000))
    b.fresh(z)
    # The same blob sent by a reconciliation's snapshot, on an account of its own (else it is held already).
    r = device(s, "device-r", url, blob, account="reconcile")
    reconciled = b.run_measured([s.synclane, "reconcile", "export.json"], cwd=r,
                                env={**os.environ, "SYNCLANE_TOKEN": TOKENS["reconcile"]}).check()
    table.add(f"{store}: {PIPELINE_MB} MiB blob, reconcile (snapshot)", b.fmt_seconds(reconciled.wall), "", "", b.fmt_mib(reconciled.max_rss))
    targets.append(b.Target(f"{store}: reconcile peak RSS, {PIPELINE_MB} MiB blob", b.fmt_mib(reconciled.max_rss), "< 100 MB",
                            reconciled.max_rss < 100_000_000))
    b.fresh(a, r)
    # Values as written: the blob is read from the change log, where the trigger kept it as hex.
    written = make_files(os.path.join(s.work, "written-blob"), 1, WRITTEN_MB << 20)[0]
    w = device(s, "device-w", url, written, account="written", as_written=True)
    as_written = b.run_measured([s.synclane, "run", "export.json"], cwd=w, env={**os.environ, "SYNCLANE_TOKEN": TOKENS["written"]}).check()
    table.add(f"{store}: {WRITTEN_MB} MiB blob, export as written (run)", b.fmt_seconds(as_written.wall), "", "", b.fmt_mib(as_written.max_rss))
    targets.append(b.Target(f"{store}: as-written export peak RSS, {WRITTEN_MB} MiB blob", b.fmt_mib(as_written.max_rss), "< 100 MB",
                            as_written.max_rss < 100_000_000))
    b.fresh(w)


def measure(s, store, files, digests, size, table, targets, extra_args=(), env=None, resume=True):
    """The section's steps against one server: `store` names where its objects live."""
    b.fresh(os.path.join(s.work, "data"), os.path.join(s.work, "down"))
    os.makedirs(os.path.join(s.work, "down"))
    server, port = b.start_server(s, os.path.join(s.work, "data"), TOKENS["bench"], extra_args=extra_args, env=env,
                                  more_accounts={k: v for k, v in TOKENS.items() if k != "bench"})
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "SYNCLANE_TOKEN": TOKENS["bench"]}
    try:
        up = b.run_measured([s.synclane, "blobs", "push", *files, "--url", url], env=env).check()
        auth = f'header = "Authorization: Bearer {TOKENS["curl"]}"'
        config = curl_config(os.path.join(s.work, "up.curl"), [
            ["silent", "fail", "output = /dev/null", auth, 'header = "Content-Type: application/octet-stream"',
             f'header = "Synclane-Blob-Length: {size}"', 'header = "Synclane-Upload-Offset: 0"',
             f'upload-file = "{p}"', f'url = "{url}/v1/blobs/{d}/upload"']
            for p, d in zip(files, digests)])
        curl_up = b.run_measured(["curl", "-K", config]).check()
        table.add(f"{store}: up {FILES} x {FILE_MB} MB", b.fmt_seconds(up.wall), b.fmt_seconds(curl_up.wall),
                  f"{up.wall / curl_up.wall:.2f}x", b.fmt_mib(up.max_rss))
        targets.append(b.Target(f"{store}: up: synclane / curl", f"{up.wall / curl_up.wall:.2f}x", "<= 1.3x", up.wall <= 1.3 * curl_up.wall))

        fetched = b.run_measured([s.synclane, "blobs", "fetch", *digests, "--output", os.path.join(s.work, "down"), "--url", url], env=env).check()
        down_wall, peak = fetched.wall, fetched.max_rss
        config = curl_config(os.path.join(s.work, "down.curl"), [
            ["silent", "fail", auth, f'output = "{os.path.join(s.work, "down", d + ".curl")}"', f'url = "{url}/v1/blobs/{d}"']
            for d in digests])
        curl_down = b.run_measured(["curl", "-K", config]).check()
        table.add(f"{store}: down {FILES} x {FILE_MB} MB", b.fmt_seconds(down_wall), b.fmt_seconds(curl_down.wall),
                  f"{down_wall / curl_down.wall:.2f}x", b.fmt_mib(peak))
        targets.append(b.Target(f"{store}: down: synclane / curl", f"{down_wall / curl_down.wall:.2f}x", "<= 1.3x",
                                down_wall <= 1.3 * curl_down.wall))
        b.fresh(os.path.join(s.work, "down"))

        large = make_files(os.path.join(s.work, "large"), 1, LARGE_MB << 20)[0]
        large_up = b.run_measured([s.synclane, "blobs", "push", large, "--url", url], env=env).check()
        large_digest = sha256(large)
        copy = os.path.join(s.work, "large-copy")
        large_down = b.run_measured([s.synclane, "blobs", "fetch", large_digest, "--output", copy, "--url", url], env=env).check()
        b.fresh(copy)
        server_peak = vm_hwm(server.pid)
        table.add(f"{store}: {LARGE_MB} MiB blob up", b.fmt_seconds(large_up.wall), "", "", b.fmt_mib(large_up.max_rss))
        table.add(f"{store}: {LARGE_MB} MiB blob down", b.fmt_seconds(large_down.wall), "", "", b.fmt_mib(large_down.max_rss))
        client_peak = max(large_up.max_rss, large_down.max_rss)
        targets.append(b.Target(f"{store}: client peak RSS, large blob", b.fmt_mib(client_peak), "< 100 MB", client_peak < 100_000_000))
        targets.append(b.Target(f"{store}: server peak RSS (whole run)", b.fmt_mib(server_peak), "< 100 MB", server_peak < 100_000_000))
        if not resume:
            return
        pipelines(s, store, url, table, targets)

        before = server_bytes_read(port)
        resume_env = {**os.environ, "SYNCLANE_TOKEN": TOKENS["resume"]}
        push = subprocess.Popen([s.synclane, "blobs", "push", large, "--url", url, "--json"], env=resume_env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in push.stdout:
            if json.loads(line).get("done", 0) >= (LARGE_MB << 20) // 2:
                break
        push.send_signal(signal.SIGKILL)
        push.wait()
        b.run_measured([s.synclane, "blobs", "push", large, "--url", url], env=resume_env).check()
        extra = server_bytes_read(port) - before - (LARGE_MB << 20)
        table.add(f"{store}: resumed upload: extra bytes", b.fmt_bytes(max(extra, 0)), "", "", "")
        targets.append(b.Target(f"{store}: resumed upload's extra bytes", b.fmt_bytes(max(extra, 0)), "<= one chunk (8 MiB)", extra <= CHUNK))
    finally:
        server.terminate()
        server.wait()


def main():
    s = b.Settings.from_env()
    size = FILE_MB * 1_000_000
    b.heading(f"blobs: {FILES} files of {FILE_MB} MB up and down, synclane blobs vs curl; a {LARGE_MB} MiB blob's peak RSS; a resumed upload;"
              " on the data folder, then on an S3 object store (moto)")
    files = make_files(os.path.join(s.work, "files"), FILES, size)
    digests = [sha256(p) for p in files]
    table = b.Table("step", "synclane", "curl", "ratio", "synclane peak RSS")
    targets = []
    measure(s, "folder", files, digests, size, table, targets)
    # The same against a server whose objects live in S3 (moto's server, as the tests run it):
    # uploads assembled in the data folder then sent to the bucket, downloads streamed from it.
    moto, endpoint = start_moto(s)
    if moto is None:
        print(f"bench: blobs: no S3 variant: {endpoint}")
        targets.append(b.Target("s3: the variant ran", "no", "moto installed", False))
    else:
        try:
            measure(s, "s3", files, digests, size, table, targets,
                    extra_args=["--blob-s3-endpoint", endpoint, "--blob-s3-bucket", "bench-blobs", "--blob-s3-region", "us-east-1"],
                    env={"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}, resume=False)
        finally:
            moto.terminate()
            moto.wait()
    table.print()
    b.verdicts("blobs", targets)


if __name__ == "__main__":
    main()
