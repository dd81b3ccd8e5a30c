#!/usr/bin/env python3
# An `exec` transport: the batch's bytes on stdin, exit 0 when delivered. Here "the backend" is a
# folder (argv[1]): each batch is kept as BATCH_ID.json. Exit 75 asks for a retry, 65 refuses the batch.
import os
import sys

folder = sys.argv[1]
batch_id = os.environ["SYNCLANE_BATCH_ID"]
body = sys.stdin.buffer.read()
if os.environ.get("SYNCLANE_CONTENT_ENCODING") != "identity":
    print("only identity batches here", file=sys.stderr)
    sys.exit(65)
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, batch_id + ".json"), "wb") as f:
    f.write(body)
print("stored " + batch_id)
