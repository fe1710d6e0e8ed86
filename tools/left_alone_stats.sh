#!/usr/bin/env bash
# Per-object rewrite of every code object under DIR with one sqtt-patch binary, summarised:
# objects instrumented / nothing to do / failed closed, functions left alone (by reason class),
# sites instrumented and skipped (docs/left-alone.md, "Measured").
# Usage: tools/left_alone_stats.sh DIR [SQTT_PATCH]   (flags: --functions 1 --barriers 1)
# Reports go to a temporary directory, removed at the end.
set -euo pipefail
DIR=$1
BIN=${2:-$(cd "$(dirname "$0")/.." && pwd)/target/release/sqtt-patch}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for f in "$DIR"/*.co; do
  n=$(basename "$f" .co)
  "$BIN" "$f" -o /dev/null --functions 1 --barriers 1 --report-json "$TMP/$n.json" \
    >/dev/null 2>&1 || true
done
python3 - "$TMP" <<'PY'
import json, os, sys, collections
d = sys.argv[1]
status = collections.Counter(); la = collections.Counter(); sites = 0; skipped = 0
for n in sorted(os.listdir(d)):
    r = json.load(open(os.path.join(d, n)))
    status[r["status"]] += 1
    for l in r["left_alone"]:
        w = l["why"]
        key = ("verifier" if "verifier rejected" in w else
               "falls off after a call" if "after its last instruction, a call" in w else
               "falls off the end" if "falls off the end" in w else
               w.split(": ", 1)[-1][:60])
        la[key] += 1
    sites += sum(sum(f["sites"].values()) for f in r["functions"])
    skipped += len(r["skipped"])
print("objects:", dict(status))
print("left alone:", sum(la.values()), dict(la))
print("sites instrumented:", sites, "skipped:", skipped)
PY
