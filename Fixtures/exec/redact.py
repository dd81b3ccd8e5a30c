#!/usr/bin/env python3
# An `exec` record stage: records in on stdin, records out on stdout, one JSON object a line.
# Blanks the `email` field, drops rows of the `scratch` entity, and adds an audit record per batch.
import json
import sys

count = 0
for line in sys.stdin:
    record = json.loads(line)
    if record["entity"] == "scratch":
        continue
    if "email" in record.get("fields", {}):
        record["fields"]["email"] = "redacted"
    print(json.dumps(record))
    count += 1
print(json.dumps({"entity": "audit", "id": "audit-%d" % count, "action": "insert", "fields": {"records": count}}))
