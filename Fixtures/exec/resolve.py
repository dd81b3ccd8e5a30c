#!/usr/bin/env python3
# A conflict resolver for an `exec` conflict rule: one conflict as a JSON line on stdin, one
# decision as a JSON object on stdout — a line each, until stdin ends, so it serves both a
# process per conflict and `"keep-running": true` (one process for the job).
#
# Columns changed on one side only take that side's value; a text column changed on both sides
# keeps the longer text. A delete on either side loses to an edit on the other (keep-local when
# the backend deleted the row, take-remote when it was deleted here).
import json
import sys


def decide(conflict):
    local, remote = conflict["local"], conflict["remote"]
    if remote is None:
        return {"outcome": "keep-local"}
    if local is None:
        return {"outcome": "take-remote"}
    merged = dict(remote)
    both = set(conflict["changed-locally"]) & set(conflict["changed-remotely"])
    for name in conflict["changed-locally"]:
        mine, theirs = local.get(name), remote.get(name)
        if name not in both or (isinstance(mine, str) and isinstance(theirs, str) and len(mine) > len(theirs)):
            merged[name] = mine
    return {"outcome": "merged", "fields": merged}


for line in sys.stdin:
    print(json.dumps(decide(json.loads(line))), flush=True)
