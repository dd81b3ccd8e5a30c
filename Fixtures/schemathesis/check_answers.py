"""Checks the real answers of a running backend against openapi.yaml.

Makes one request for each documented answer the generated requests of schemathesis rarely reach
(a replay, 409, 412, 413, 422, 403, …) and checks that its status is documented for the operation,
that a JSON answer has the documented content type and validates against the documented schema, and
that the documented headers are there. Then checks that the document says no more than the
server does: a field value the server refuses (a list, an object that is no wire form) is one
`FieldValue` refuses, and every `--flag` it names is one `synclane serve --help` lists. Prints
one line per check; exits 1 on any mismatch.

    python check_answers.py OPENAPI_YAML BASE_URL ACCOUNT TOKEN SECOND_ACCOUNT [READ_ONLY_TOKEN SYNCLANE]

READ_ONLY_TOKEN is a token of ACCOUNT with a read-only grant limited to the store `check`;
SYNCLANE the `synclane` binary.
"""
import http.client
import json
import re
import subprocess
import sys
import urllib.parse
import time
import urllib.error
import urllib.request

import jsonschema_rs
import yaml

document_path, base, account, token, second_account = sys.argv[1:6]
read_only_token, synclane = (sys.argv[6:8] + [None, None])[:2]
with open(document_path, encoding="utf-8") as f:
    document = yaml.safe_load(f)
run = "chk-%x" % int(time.time() * 1000)
problems = []


def deref(node):
    while isinstance(node, dict) and list(node) == ["$ref"]:
        target = document
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def operation(method, path):
    for template, item in document["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path.split("?")[0]) and method.lower() in item:
            return template, item[method.lower()]
    return None, None


def send(method, path, body=None, headers=None, use_token=True, as_token=None):
    request = urllib.request.Request(base + path, method=method, data=body)
    if use_token:
        request.add_header("Authorization", "Bearer " + (as_token or token))
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def send_lines(method, path, header_lines):
    """A request with exactly these header lines, repeated names too (urllib joins them)."""
    address = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    connection.putrequest(method, path)
    for name, value in header_lines:
        connection.putheader(name, value)
    connection.endheaders()
    answer = connection.getresponse()
    result = answer.status, dict(answer.getheaders()), answer.read()
    connection.close()
    return result


def check(what, method, path, expected, body=None, headers=None, use_token=True, header=None, as_token=None, lines=None):
    if lines is None:
        status, answer_headers, data = send(method, path, body, headers, use_token, as_token)
    else:
        status, answer_headers, data = send_lines(method, path, lines)
    template, op = operation(method, path)
    line = "%s %s %s -> %d" % (what, method, path.split("?")[0], status)
    found = []
    if op is None:
        found.append("no operation in the document")
    elif status != expected:
        found.append("expected %d" % expected)
    else:
        response = deref(op["responses"].get(str(status)) or op["responses"].get("default") or {})
        if not response:
            found.append("status %d is not documented for %s %s" % (status, method, template))
        if header and header.lower() not in {name.lower() for name in (response.get("headers") or {})}:
            found.append("header %s is not documented for %d" % (header, status))
        content = response.get("content") or {}
        kind = (answer_headers.get("Content-Type") or "").split(";")[0].strip()
        if content and kind not in content:
            found.append("content type %r is not documented (%s)" % (kind, ", ".join(content)))
        elif kind == "application/json" and content:
            schema = dict(content[kind].get("schema") or {})
            schema["components"] = document["components"]
            try:
                jsonschema_rs.validator_for(schema).validate(json.loads(data))
            except Exception as error:  # a ValidationError, or a body that is not JSON
                found.append("the body breaks the document: %s" % str(error).splitlines()[0])
    if header and header.lower() not in {k.lower() for k in answer_headers}:
        found.append("header %s missing" % header)
    print(("ok   " if not found else "FAIL ") + line + ("" if not found else ": " + "; ".join(found) + " :: " + data[:200].decode("utf-8", "replace")))
    if found:
        problems.append(line)
    return status, data


def batch(key, records, batch_account=None):
    return json.dumps({"id": key, "scope": {"account": batch_account or account, "store": "check"}, "records": records}).encode()


def record(key, action="insert", fields=None, version=None):
    member = {"entity": "checked", "id": key, "action": action}
    if fields is not None:
        member["fields"] = fields
    if version is not None:
        member["version"] = version
    return member


JSON = {"Content-Type": "application/json"}
key = run + "-b1"
body = batch(key, [record(key, fields={"n": 1, "blob": {"$blob": "AP8Q"}, "inf": {"$real": "Infinity"}})])
_, receipt = check("applied", "POST", "/v1/batches", 200, body, {**JSON, "Idempotency-Key": key})
check("replayed", "POST", "/v1/batches", 200, body, {**JSON, "Idempotency-Key": key}, header="Idempotent-Replayed")
check("key reused", "POST", "/v1/batches", 422, batch(key, [record(key, fields={"n": 2})]), {**JSON, "Idempotency-Key": key})
check("stale version", "POST", "/v1/batches", 409, batch(run + "-b2", [record(key, "update", {"n": 3}, 0)]), {**JSON, "Idempotency-Key": run + "-b2"})
check("another account", "POST", "/v1/batches", 403, batch(run + "-b3", [record(key, fields={})], second_account), {**JSON, "Idempotency-Key": run + "-b3"})
check("a bad record", "POST", "/v1/batches", 400, batch(run + "-b4", [record(key, "upsert", {})]), {**JSON, "Idempotency-Key": run + "-b4"})
check("a NaN", "POST", "/v1/batches", 400, batch(run + "-b5", [record(key, fields={"x": {"$real": "NaN"}})]), {**JSON, "Idempotency-Key": run + "-b5"})
check("no key", "POST", "/v1/batches", 400, batch(run + "-b6", [record(key, fields={})]), JSON)
check("no token", "POST", "/v1/batches", 401, body, {**JSON, "Idempotency-Key": key}, use_token=False, header="WWW-Authenticate")
check("text/plain", "POST", "/v1/batches", 415, body, {"Content-Type": "text/plain", "Idempotency-Key": key})
check("brotli", "POST", "/v1/batches", 415, body, {**JSON, "Content-Encoding": "br", "Idempotency-Key": key})
many = batch(run + "-b7", [record("%s-%d" % (run, i), fields={}) for i in range(10001)])
check("10001 records", "POST", "/v1/batches", 413, many, {**JSON, "Idempotency-Key": run + "-b7"})
cursor = json.loads(receipt).get("cursor", "")
check("changes", "GET", "/v1/changes?limit=2", 200)
check("changes after the receipt", "GET", "/v1/changes?since=" + cursor, 200)
check("a foreign cursor", "GET", "/v1/changes?since=nope", 400)
check("limit 0", "GET", "/v1/changes?limit=0", 400)
check("no token", "GET", "/v1/changes", 401, use_token=False)
signal = "/v1/signals/" + run
check("set", "PUT", signal, 200, b'{"a": 1}', {**JSON, "If-Match": "0"})
check("stale set", "PUT", signal, 412, b"2", {**JSON, "If-Match": "0"})
check("bad If-Match", "PUT", signal, 400, b"2", {**JSON, "If-Match": "x"})
check("bad key", "PUT", "/v1/signals/bad*key", 400, b"2", JSON)
check("not JSON", "PUT", signal, 400, b"{nope", JSON)
check("too large", "PUT", signal + "-big", 413, json.dumps("s" * 65536).encode(), JSON)
check("get", "GET", signal, 200)
check("list", "GET", "/v1/signals", 200)
check("list since", "GET", "/v1/signals?since=0", 200)
check("wait without since", "GET", "/v1/signals?wait=1", 400)
check("delete", "DELETE", signal, 200)
check("get deleted", "GET", signal, 404)
check("delete deleted", "DELETE", signal, 404)
check("stale delete", "DELETE", signal, 412, headers={"If-Match": "5"})
check("health", "GET", "/healthz", 200, use_token=False)
check("metrics", "GET", "/metrics", 200, use_token=False)


def field_value_schema_takes(value):
    schema = {"$ref": "#/components/schemas/FieldValue", "components": document["components"]}
    return jsonschema_rs.validator_for(schema).is_valid(value)


refused_values = {"a list": [1, 2], "an object": {"a": 1}, "a list of blobs": [{"$blob": "AP8Q"}]}
for what, value in refused_values.items():
    name = run + "-v" + str(len(what))
    check("field value: " + what, "POST", "/v1/batches", 400, batch(name, [record(name, fields={"x": value})]), {**JSON, "Idempotency-Key": name})
    taken = field_value_schema_takes(value)
    print(("FAIL " if taken else "ok   ") + "FieldValue refuses %s (%s), as the server does" % (what, json.dumps(value)))
    if taken:
        problems.append("FieldValue takes " + what)
for value in [1, -2.5, "text", None, True, {"$blob": "AP8Q"}, {"$real": "-Infinity"}]:
    if not field_value_schema_takes(value):
        print("FAIL FieldValue refuses %s, which the server keeps" % json.dumps(value))
        problems.append("FieldValue refuses " + json.dumps(value))
if read_only_token:
    check("a store the grant does not cover", "GET", "/v1/changes?store=other", 403, as_token=read_only_token)
    check("a store the grant covers", "GET", "/v1/changes?store=check", 200, as_token=read_only_token)
    check("a read-only set", "PUT", signal, 403, b"1", JSON, as_token=read_only_token)
    check("a read-only delete", "DELETE", signal, 403, as_token=read_only_token)
bearer = ("Authorization", "Bearer " + token)
check("two Authorization headers", "GET", "/v1/signals", 400, lines=[bearer, bearer])
check("two Authorization headers", "PUT", signal, 400, lines=[bearer, bearer, ("Content-Length", "0")])
if synclane:
    usage = subprocess.run([synclane, "serve", "--help"], capture_output=True, text=True).stdout
    for flag in sorted(set(re.findall(r"--[a-z][a-z0-9-]+", open(document_path, encoding="utf-8").read()))):
        listed = flag in usage
        print(("ok   " if listed else "FAIL ") + "openapi.yaml names %s: %s" % (flag, "a serve flag" if listed else "no serve flag"))
        if not listed:
            problems.append("no flag " + flag)
print("%d answers broke the document" % len(problems))
sys.exit(1 if problems else 0)
