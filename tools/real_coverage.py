#!/usr/bin/env python3
"""Summarise sqtt-patch JSON reports (one per object x feature set) into a coverage table.

Usage: real_coverage.py REPORT_DIR  (files named <object>__<featureset>.json, written by
tools/real_coverage.sh). Prints a Markdown table: per object and feature set, the sites
instrumented / sites found (percent), the object's status and the functions left alone.
Sites found = sites instrumented (the report's per-function `sites`) + sites skipped.
Sites inside compiled-out stubs (functions left alone because execution falls off their end:
code that cannot run) are counted apart: "runnable" is instrumented / (found - in stubs).
The scope-filter flag computation (`scope_init`) is not a requested site and is not counted.
"""
import json
import os
import sys
from collections import Counter, defaultdict

# sqtt_rewrite::verbatim::STUB_SKIP: the skip reason of sites in compiled-out stubs
STUB_SKIP = "function left alone (compiled-out stub that cannot run"


def summarise(path):
    with open(path) as f:
        r = json.load(f)
    reports = r if isinstance(r, list) else [r]
    done, skipped, why = Counter(), Counter(), Counter()
    status, left, stubs = Counter(), 0, 0
    for rep in reports:
        status[rep.get("status", "?")] += 1
        left += len(rep.get("left_alone", []))
        for fn in rep.get("functions", []):
            for k, n in fn.get("sites", {}).items():
                if k != "scope_init":
                    done[k] += n
        for s in rep.get("skipped", []):
            skipped[s["kind"]] += 1
            why[s["why"][:70]] += 1
            stubs += s["why"].startswith(STUB_SKIP)
    return done, skipped, why, status, left, stubs


def pct_of(a, b):
    return f"{100.0 * a / b:.2f} %" if b else "n/a"


def main():
    d = sys.argv[1]
    rows = defaultdict(dict)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json"):
            continue
        obj, feat = name[:-5].rsplit("__", 1)
        try:
            rows[obj][feat] = summarise(os.path.join(d, name))
        except (OSError, ValueError, KeyError) as e:
            rows[obj][feat] = e
    feats = sorted({f for r in rows.values() for f in r})
    print("| object | " + " | ".join(feats) + " |")
    print("|---|" + "---|" * len(feats))
    totals = {f: [0, 0, 0] for f in feats}
    reasons = Counter()
    for obj, r in sorted(rows.items()):
        cells = []
        for f in feats:
            s = r.get(f)
            if s is None:
                cells.append("-")
            elif isinstance(s, Exception):
                cells.append("error")
            else:
                done, skipped, why, status, left, stubs = s
                a, b = sum(done.values()), sum(done.values()) + sum(skipped.values())
                totals[f][0] += a
                totals[f][1] += b
                totals[f][2] += stubs
                reasons.update(why)
                st = ",".join(k for k in status if k != "instrumented")
                pct = f"{100.0 * a / b:.1f} %" if b else "n/a"
                extra = f" {st}" if st else ""
                extra += f" ({left} left alone)" if left else ""
                if stubs:
                    extra += f"; runnable {pct_of(a, b - stubs)} ({stubs} in stubs)"
                cells.append(f"{a}/{b} {pct}{extra}")
        print(f"| {obj} | " + " | ".join(cells) + " |")
    cells = []
    for f in feats:
        a, b, stubs = totals[f]
        cell = f"**{a}/{b} {100.0 * a / b:.2f} %**" if b else "n/a"
        if stubs:
            cell += f"; runnable **{pct_of(a, b - stubs)}**"
        cells.append(cell)
    print("| **all** | " + " | ".join(cells) + " |")
    print()
    print("Skip reasons (all objects and feature sets):")
    for w, n in reasons.most_common(12):
        print(f"- {n}: {w}")
    times(d)


def read_time(path):
    """(wall s, CPU s, peak KiB) from a `/usr/bin/time -f "%e %U %S %M"` file, or None."""
    try:
        with open(path) as f:
            last = f.read().split("\n")
        w, u, s, m = [l for l in last if l.strip()][-1].split()
        return float(w), float(u) + float(s), int(m)
    except (OSError, ValueError, IndexError):
        return None


def times(d):
    """Time and peak memory per object and feature set beside llvm-objdump-22 -d of the same
    object (written by real_coverage.sh with TIMES=1)."""
    objs = sorted(n[:-len("__objdump.time")] for n in os.listdir(d) if n.endswith("__objdump.time"))
    if not objs:
        return
    feats = sorted({n[:-5].rsplit("__", 1)[1] for n in os.listdir(d)
                    if n.endswith(".time") and not n.endswith("__objdump.time")})
    print()
    print("Time and peak memory: CPU seconds (x llvm-objdump-22 -d CPU), peak MiB (x object size)")
    print()
    print("| object | size MiB | llvm-objdump-22 -d | " + " | ".join(feats) + " |")
    print("|---|---|---|" + "---|" * len(feats))
    for o in objs:
        ref = read_time(os.path.join(d, o + "__objdump.time"))
        try:
            size = int(open(os.path.join(d, o + "__bytes")).read())
        except (OSError, ValueError):
            size = 0
        cells = []
        for f in feats:
            t = read_time(os.path.join(d, f"{o}__{f}.time"))
            if t is None or ref is None:
                cells.append("-")
                continue
            ratio = f"{t[1] / ref[1]:.1f}x" if ref[1] else "-"
            mem = f"{t[2] / 1024:.0f} MiB" + (f" ({t[2] * 1024 / size:.1f}x)" if size else "")
            cells.append(f"{t[1]:.0f} s ({ratio}), {mem}")
        r = f"{ref[1]:.0f} s, {ref[2] / 1024:.0f} MiB" if ref else "-"
        print(f"| {o} | {size / 2**20:.0f} | {r} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
