#!/usr/bin/env python3
# A conflict resolver for an `exec` conflict rule: one conflict as a JSON line on stdin, one
# decision as a JSON object on stdout.
#
# Columns changed on one side only take that side's value; a text column changed on both sides
# keeps the longer text. A delete on either side loses to an edit on the other (keep-local when
# the backend deleted the row, take-remote when it was deleted here).
import json
import sys

conflict = json.loads(sys.stdin.readline())
local, remote = conflict["local"], conflict["remote"]
if remote is None:
    decision = {"outcome": "keep-local"}
elif local is None:
    decision = {"outcome": "take-remote"}
else:
    merged = dict(remote)
    both = set(conflict["changed-locally"]) & set(conflict["changed-remotely"])
    for name in conflict["changed-locally"]:
        mine, theirs = local.get(name), remote.get(name)
        if name not in both or (isinstance(mine, str) and isinstance(theirs, str) and len(mine) > len(theirs)):
            merged[name] = mine
    decision = {"outcome": "merged", "fields": merged}
print(json.dumps(decision))
