#!/usr/bin/env python3
"""Counts the sites of code objects independently of sqtt-patch's report and compares them with
a `sqtt-patch batch --report-json` report of the same inputs (issue 37's "counted
independently"). LLVM's tools give the facts: `.kd` symbols (llvm-readelf-22) are the kernels;
function symbols (STT_FUNC, each running to the next one) are the functions; in
`llvm-objdump-22 -d` of the input, `s_barrier` / `s_barrier_signal` are barrier sites and VMEM
loads, stores and atomics (`buffer_`, `tbuffer_`, `global_`, `flat_`) are memory operations.
A function counts as covered for a feature when the report lists it as instrumented, not left
alone, with no skipped site of that feature; otherwise every one of its sites counts as missed.
Kernel scopes: one per kernel (`.kd`) whose kernel is covered.

Usage: tools/tensile_coverage.py [--cache DIR] [--jobs N] REPORT.json ROOT...
  ROOTs: the batch's PATH arguments. --cache keeps the per-object counts (they are the slow
  part: one llvm-objdump-22 -d per object) for the next feature set's report.
Prints a Markdown table per target (files, kernels, barriers, memory operations: covered /
found) and the skipped sites by reason; exits 1 if a file of the report was not instrumented
(gfx8 files, outside sqtt-patch's targets, are listed apart).
Bundles (CCOB, `__CLANG_OFFLOAD_BUNDLE__`) are unpacked with `sqtt-patch extract` first
(SQTT_PATCH: the binary, default target/release/sqtt-patch).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from bisect import bisect_right
from collections import Counter, defaultdict
from multiprocessing import Pool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SQTT_PATCH", os.path.join(ROOT, "target/release/sqtt-patch"))
# Mnemonics of interest; everything else is filtered out by grep before Python sees it.
INTERESTING = r"^\s+(s_barrier|s_barrier_signal|buffer_|tbuffer_|global_|flat_)"
ADDR = re.compile(r"//\s*([0-9A-Fa-f]+):")
NOT_MEMORY = re.compile(r"(wbinvl1|_inv|_wb|wbl2|_gl[012]_|prefetch)")


def objects(path, tmp):
    """The code objects of one input file (itself, or what `extract` unpacks)."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head.startswith(b"\x7fELF"):
        return [path]
    out = tempfile.mkdtemp(dir=tmp)
    subprocess.run([BIN, "extract", "-o", out, path], check=True, capture_output=True)
    return [os.path.join(out, n) for n in sorted(os.listdir(out))]


def functions_of(obj):
    """(sorted function start addresses, their names, kernel names) from llvm-readelf-22."""
    syms = subprocess.run(["llvm-readelf-22", "--syms", "--dyn-syms", "-W", obj],
                          capture_output=True, text=True, check=True).stdout
    funcs, kernels = {}, set()
    for line in syms.splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].endswith(":"):
            continue
        name = parts[7]
        if name.endswith(".kd"):
            kernels.add(name[:-3])
        elif parts[3] == "FUNC":
            funcs[int(parts[1], 16)] = name
    starts = sorted(funcs)
    return starts, [funcs[s] for s in starts], sorted(kernels)


def count_object(obj):
    """Per function: barrier sites and VMEM operations in llvm-objdump-22 -d of `obj`."""
    starts, names, kernels = functions_of(obj)
    per = defaultdict(lambda: [0, 0])
    dis = subprocess.Popen(["llvm-objdump-22", "-d", obj], stdout=subprocess.PIPE)
    grep = subprocess.Popen(["grep", "-E", INTERESTING], stdin=dis.stdout,
                            stdout=subprocess.PIPE, text=True)
    dis.stdout.close()
    for line in grep.stdout:
        mnem = line.split(None, 1)[0]
        m = ADDR.search(line)
        if not m:
            continue
        i = bisect_right(starts, int(m.group(1), 16)) - 1
        if i < 0:
            continue
        if mnem in ("s_barrier", "s_barrier_signal"):
            per[names[i]][0] += 1
        elif mnem.startswith(("buffer_", "tbuffer_", "global_", "flat_")) and \
                re.search(r"(load|store|atomic)", mnem) and not NOT_MEMORY.search(mnem):
            per[names[i]][1] += 1
    grep.wait()
    if dis.wait() != 0:
        raise RuntimeError(f"llvm-objdump-22 -d {obj} failed")
    return {"kernels": kernels, "functions": {n: per.get(n, [0, 0]) for n in names}}


def count_file(args):
    """Counts of every code object in one input file, cached by the file's SHA-256."""
    path, cache = args
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    cached = os.path.join(cache, digest + ".json") if cache else None
    if cached and os.path.exists(cached):
        with open(cached) as f:
            return path, json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        counts = [count_object(o) for o in objects(path, tmp)]
    if cached:
        with open(cached + ".part", "w") as f:
            json.dump(counts, f)
        os.replace(cached + ".part", cached)
    return path, counts


def feature_of(kind):
    """The feature a skipped site's kind belongs to."""
    k = kind.lower()
    if "barrier" in k:
        return "barriers"
    if "memory" in k or "load" in k or "store" in k:
        return "memory"
    if "trace" in k or "addr" in k:
        return "trace"
    return k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("report")
    ap.add_argument("roots", nargs="+")
    a = ap.parse_args()
    if a.cache:
        os.makedirs(a.cache, exist_ok=True)
    report = json.load(open(a.report))
    files = {}
    for f in report["files"]:
        top, _, rel = f["path"].partition("/")
        path = next((os.path.join(r, rel) for r in a.roots
                     if os.path.basename(os.path.normpath(r)) == top), None)
        if path is None or not os.path.exists(path):
            sys.exit(f"{f['path']}: not found under the roots given")
        files[path] = f
    # gfx8 is not a target of sqtt-patch (gfx9 and later): its objects are input errors by
    # design, listed apart and not counted.
    unsupported = sorted(p for p in files if re.search(r"gfx8[0-9a-f]*", os.path.basename(p)))
    for p in unsupported:
        del files[p]
    with Pool(a.jobs) as pool:
        counts = dict(pool.imap_unordered(count_file, [(p, a.cache) for p in files], 4))

    rows = defaultdict(Counter)
    why = Counter()
    lost = []
    for path, f in sorted(files.items()):
        objs = f.get("objects") or []
        target = (re.search(r"gfx[0-9a-f]+", os.path.basename(path)) or [None])[0]
        rows[target]["files"] += 1
        ok = bool(objs) and not f.get("error") and all(
            o.get("status") in ("instrumented", "nothing_to_do") for o in objs)
        if not ok:
            lost.append(f"{f['path']}: {f.get('error') or [o.get('reasons') for o in objs]}")
        rows[target]["files instrumented"] += ok
        # name -> (kernel status or None, sites by feature, skipped features)
        seen = {}
        for o in objs:
            for row in (o.get("kernels") or []) + (o.get("functions") or []):
                sites = Counter()
                for kind, n in (row.get("sites") or {}).items():
                    sites[feature_of(kind)] += n
                skipped = set()
                for key, n in (row.get("skipped") or {}).items():
                    kind, _, reason = key.partition(": ")
                    skipped.add(feature_of(kind))
                    why[(feature_of(kind), reason[:100])] += n
                seen[row["name"]] = (row.get("status", "instrumented"), sites, skipped)

        def covered(name, feature, found):
            status, sites, skipped = seen.get(name, ("absent", Counter(), set()))
            if status in ("failed_closed", "error") or feature in skipped:
                return False
            return found == 0 or sites[feature] > 0

        for c in counts[path]:
            for k in c["kernels"]:
                rows[target]["kernels"] += 1
                status, _, skipped = seen.get(k, ("absent", Counter(), set()))
                rows[target]["kernels covered"] += status == "instrumented" and not skipped
            for name, (bar, mem) in c["functions"].items():
                rows[target]["barriers"] += bar
                rows[target]["memory ops"] += mem
                rows[target]["barriers covered"] += bar * covered(name, "barriers", bar)
                rows[target]["memory ops covered"] += mem * covered(name, "memory", mem)

    opts = report.get("options") or {}
    asked = {"barriers": opts.get("barriers") == "true",
             "memory": opts.get("memory", "None") != "None"}

    def pct(a, b, feature=None):
        if feature and not asked[feature]:
            return "not asked"
        return f"{a:,} / {b:,} ({100.0 * a / b:.2f} %)" if b else "0 / 0"

    print("| target | files instrumented | kernels (kernel scopes) | barriers | memory operations |")
    print("|---|---|---|---|---|")
    tot = Counter()
    for t, r in sorted(rows.items(), key=lambda x: str(x[0])):
        tot.update(r)
        print(f"| {t} | {r['files instrumented']} / {r['files']} | "
              f"{pct(r['kernels covered'], r['kernels'])} | "
              f"{pct(r['barriers covered'], r['barriers'], 'barriers')} | "
              f"{pct(r['memory ops covered'], r['memory ops'], 'memory')} |")
    print(f"| all | {tot['files instrumented']} / {tot['files']} | "
          f"{pct(tot['kernels covered'], tot['kernels'])} | "
          f"{pct(tot['barriers covered'], tot['barriers'], 'barriers')} | "
          f"{pct(tot['memory ops covered'], tot['memory ops'], 'memory')} |")
    if why:
        print("\nSkipped sites by feature and reason (the report's own count):")
        for (feat, w), n in why.most_common():
            print(f"- {feat}: {n:,} x {w}")
    if unsupported:
        print(f"\n{len(unsupported)} gfx8 file(s) not counted (not a supported target; the batch "
              "names each as an input error)")
    for line in lost:
        print(f"not instrumented: {line}")
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
