#!/usr/bin/env python3
"""Counts kernels and barrier sites of code objects independently of sqtt-patch's report
(llvm-readelf-22 for `.kd` symbols, llvm-objdump-22 -d for barriers) and compares them with a
`sqtt-patch batch --report-json` report of the same inputs (issue 37's "counted independently").
A kernel the report does not list as instrumented counts every one of its sites as missed.

Usage: tools/tensile_coverage.py REPORT.json ROOT...   (ROOTs: the batch's PATH arguments)
Bundles (CCOB, `__CLANG_OFFLOAD_BUNDLE__`) are unpacked with `sqtt-patch extract` into a temp
directory first (SQTT_PATCH: the binary, default target/release/sqtt-patch).
"""
import json, os, re, subprocess, sys, tempfile
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SQTT_PATCH", os.path.join(ROOT, "target/release/sqtt-patch"))


def objects(path, tmp):
    """The code objects of one input file (itself, or what `extract` unpacks)."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head.startswith(b"\x7fELF"):
        return [path]
    out = tempfile.mkdtemp(dir=tmp)
    subprocess.run([BIN, "extract", "-o", out, path], check=True, capture_output=True)
    return [os.path.join(out, n) for n in sorted(os.listdir(out))]


def count(obj):
    """(kernels, barrier sites) of one code object, from LLVM's tools."""
    syms = subprocess.run(["llvm-readelf-22", "--dyn-syms", "-W", obj],
                          capture_output=True, text=True).stdout
    kernels = sum(1 for l in syms.splitlines() if l.endswith(".kd"))
    dis = subprocess.run(["llvm-objdump-22", "-d", obj], capture_output=True, text=True).stdout
    barriers = 0
    for l in dis.splitlines():
        m = re.match(r"\s+(s_barrier\S*)", l)
        if m and m.group(1) in ("s_barrier", "s_barrier_signal"):
            barriers += 1
    return kernels, barriers


def main():
    report = json.load(open(sys.argv[1]))
    roots = sys.argv[2:]
    rows = {f["path"]: f for f in report["files"]}
    tot = defaultdict(int)
    with tempfile.TemporaryDirectory() as tmp:
        for key, f in sorted(rows.items()):
            # Report keys are `<root name>/<relative path>`.
            top, _, rel = key.partition("/")
            path = next((os.path.join(r, rel) for r in roots
                         if os.path.basename(os.path.normpath(r)) == top), None)
            if path is None or not os.path.exists(path):
                continue
            k_ind = b_ind = 0
            for o in objects(path, tmp):
                k, b = count(o)
                k_ind, b_ind = k_ind + k, b_ind + b
            k_rep = b_rep = 0
            for o in f.get("objects", []):
                for k in o.get("kernels") or []:
                    if k.get("status") == "instrumented":
                        k_rep += 1
                        s = k.get("sites") or {}
                        b_rep += s.get("barrier", 0) + s.get("barrier_pair", 0)
                for fn in o.get("functions") or []:
                    s = fn.get("sites") or {}
                    b_rep += s.get("barrier", 0) + s.get("barrier_pair", 0)
            tot["files"] += 1
            tot["kernels (.kd)"] += k_ind
            tot["kernels instrumented (report)"] += k_rep
            tot["barriers (llvm-objdump-22)"] += b_ind
            tot["barriers marked (report)"] += b_rep
            if (k_ind, b_ind) != (k_rep, b_rep):
                print(f"{key}: kernels {k_rep}/{k_ind}, barriers {b_rep}/{b_ind}")
    for k, v in tot.items():
        print(f"{k}: {v}")
    if tot["barriers (llvm-objdump-22)"]:
        print("barrier coverage: %.2f %%" % (100.0 * tot["barriers marked (report)"]
                                            / tot["barriers (llvm-objdump-22)"]))


if __name__ == "__main__":
    main()
