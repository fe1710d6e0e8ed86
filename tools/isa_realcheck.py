#!/usr/bin/env python3
"""Instruction-by-instruction comparison of `sqtt-patch dis --format=compare` with
`llvm-objdump-22 -d` on real code objects, per library (issue 13, docs/isa.md).

Usage: tools/isa_realcheck.py [--sample N] [--bin PATH] [--diffs FILE] NAME=DIR_OR_FILE ...

For every code object (`*.co`, `*.hsaco`, `*.o` or any ELF with EM_AMDGPU under DIR) both
tools disassemble the whole object; instructions are matched by address. Counted per
library: LLVM's instructions (lines it prints; folded zero runs `...` excluded), those we
decode at the same address with the same length in bytes (LLVM's raw words), and those
with identical text (a branch LLVM names by a symbol, `s_branch label_x`, counts as equal when
the mnemonic is the same). `.long` lines (LLVM cannot decode) are counted apart.
The 16-bit mode follows the `dis` test: LLVM 22's default for the processor, or
`--mattr=+real-true16` when the default leaves `.long` lines and that mode does not.

--sample N: per library and processor, only N objects (evenly spaced in name order, so
every processor is represented); 0 = all.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import struct
import subprocess
import sys

OBJDUMP = "/usr/lib/llvm-22/bin/llvm-objdump"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mach_names():
    """EF_AMDGPU_MACH value -> processor name, from isa-tables/targets.tsv."""
    out = {}
    for line in open(os.path.join(ROOT, "isa-tables/targets.tsv")):
        c = line.rstrip("\n").split("\t")
        if line.startswith("#") or len(c) < 4 or c[3] == "-":
            continue
        out.setdefault(int(c[3], 16), c[0])
    return out


MACH = mach_names()


def processor(path):
    """Processor of an AMDGPU ELF (e_machine 224, e_flags low 8 bits), else None."""
    with open(path, "rb") as f:
        h = f.read(64)
    if len(h) < 52 or h[:4] != b"\x7fELF" or h[4] != 2:
        return None
    if struct.unpack_from("<H", h, 18)[0] != 224:
        return None
    return MACH.get(struct.unpack_from("<I", h, 48)[0] & 0xFF)


LINE = re.compile(r"^\t(.*?)\s*// ([0-9A-F]+): ((?:[0-9A-F]{8} ?)+)\s*$")


def objdump(path, mcpu, mattr):
    cmd = [OBJDUMP, "-d", f"--mcpu={mcpu}", path] + mattr
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{path}: llvm-objdump failed: {r.stderr.strip()[:200]}")
    insts, longs = {}, 0
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        text = m.group(1).strip()
        if text.startswith(".long"):
            longs += 1
            continue
        insts[int(m.group(2), 16)] = (4 * len(m.group(3).split()), text)
    return insts, longs


def ours(path, binary):
    r = subprocess.run([binary, "dis", "--format=compare", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{path}: sqtt-patch dis failed: {r.stderr.strip()[:200]}")
    out = {}
    for line in r.stdout.splitlines():
        a, n, t = line.split("\t", 2)
        out[int(a, 16)] = (int(n), t)
    return out


def compare(path, binary):
    mcpu = processor(path)
    llvm, longs = objdump(path, mcpu, [])
    if longs:
        l2, longs2 = objdump(path, mcpu, ["--mattr=+real-true16"])
        if longs2 < longs:
            llvm, longs = l2, longs2
    mine = ours(path, binary)
    n = ln = tx = 0
    diffs = []
    for addr, (size, text) in llvm.items():
        n += 1
        o = mine.get(addr)
        if o is None or o[0] != size:
            diffs.append((path, mcpu, addr, "length", o, (size, text)))
            continue
        ln += 1
        t = o[1]
        if t == text or (" label_" in text and t.split(" ")[0] == text.split(" ")[0]):
            tx += 1
        else:
            diffs.append((path, mcpu, addr, "text", o, (size, text)))
    return mcpu, n, ln, tx, longs, diffs


def objects(root):
    if os.path.isfile(root):
        return [root]
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            if not os.path.islink(p) and processor(p):
                out.append(p)
    return sorted(out)


def sample(paths, k):
    if k <= 0:
        return paths
    by_cpu = collections.defaultdict(list)
    for p in paths:
        by_cpu[processor(p)].append(p)
    out = []
    for ps in by_cpu.values():
        step = max(1, len(ps) // k)
        out += ps[::step][:k]
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/sqtt-patch"))
    ap.add_argument("--diffs", help="write every disagreement to this TSV file")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("libs", nargs="+", metavar="NAME=PATH")
    a = ap.parse_args()
    dfile = open(a.diffs, "w") if a.diffs else None
    total_fail = False
    print("| library | code objects | processors | instructions | length equal | text equal | `.long` (LLVM undecoded) |")
    print("|---|---|---|---|---|---|---|")
    for spec in a.libs:
        name, path = spec.split("=", 1)
        files = sample(objects(path), a.sample)
        cpus = collections.Counter()
        n = ln = tx = longs = 0
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            for mcpu, fn, fl, ft, flong, diffs in ex.map(lambda p: compare(p, a.bin), files):
                cpus[mcpu] += 1
                n, ln, tx, longs = n + fn, ln + fl, tx + ft, longs + flong
                for d in diffs:
                    if dfile:
                        dfile.write("\t".join([d[0], d[1], hex(d[2]), d[3], repr(d[4]), repr(d[5])]) + "\n")
        pct = lambda x: f"{100.0 * x / n:.4f} %" if n else "-"
        print(f"| {name} | {len(files)} | {', '.join(sorted(cpus))} | {n:,} | {pct(ln)} ({n - ln:,} differ) "
              f"| {pct(tx)} ({n - tx:,} differ) | {longs:,} |", flush=True)
        total_fail |= ln != n or (n and tx < 0.9999 * n)
    sys.exit(1 if total_fail else 0)


if __name__ == "__main__":
    main()
