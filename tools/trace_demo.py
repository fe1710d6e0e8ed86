#!/usr/bin/env python3
"""Writes a small synthetic rocprofv3-style capture for a code object instrumented with
`--functions N --kernel-scopes`, used for the pictures in docs/trace.md (the gfx942 `calls`
fixture built with -g: device functions called from the kernels, and the inlined fx.h helpers as
DWARF inlined scopes).

Usage: tools/trace_demo.py INSTRUMENTED.co OUT_DIR [KERNEL...]
(tools/draw_pictures.sh runs it for the README's pictures.)
The marker ids are read from the object's .sqtt_funcmap with llvm-objcopy-22 (on PATH): kernels are its
`U:` rows (kernel scopes), functions and inlined scopes its `F:` rows. Each kernel is one dispatch
(`ui_output_agent_1_dispatch_<n>/`, as rocprofv3 writes them) on 2 shader engines x 4 CUs x
4 slots, 3 wave instances per slot; each wave walks the kernel's call tree with jittered
durations: the `calls` fixture's real call tree (fixtures/src/calls.hip) when the object is that
fixture; else the kernel's straight walk: its markers in address order as `sqtt-patch dis` lists
them (the binary named by $SQTT_PATCH, else `sqtt-patch` on PATH), branches and calls not taken,
about 4 cycles per instruction between markers (so inlined scopes nest as in the code), for the
KERNELs named (mangled) or every kernel. `realtime.json` gives a 2.1 GHz shader clock. The jitter
is seeded: the same object gives the same capture.
"""
import json, os, random, shutil, subprocess, sys, tempfile

if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
    sys.exit("usage: tools/trace_demo.py INSTRUMENTED.co OUT_DIR [KERNEL...]")
co, out = sys.argv[1], sys.argv[2]
SQTT_PATCH = os.environ.get("SQTT_PATCH", "sqtt-patch")
with tempfile.TemporaryDirectory() as t:
    dump = os.path.join(t, "fm")
    subprocess.run(["llvm-objcopy-22", f"--dump-section=.sqtt_funcmap={dump}", co,
                    os.path.join(t, "o")], check=True)
    text = open(dump, "rb").read().decode().replace("\0", "\n")
ids, kinds = {}, {}
for line in text.splitlines():
    p = line.split(":", 2)
    if len(p) == 3 and p[0] in "FUP":
        name = p[2].split("@")[0]
        ids[name] = int(p[1])
        kinds.setdefault(p[0], []).append(name)
if not kinds.get("U"):
    sys.exit(f"{co}: no kernel scopes in .sqtt_funcmap: instrument with --kernel-scopes")
E = lambda n: (ids[n] << 2) | 2


def node(name, kids, own):
    """A call-tree node; inlined helpers absent from the funcmap (no -g) fold into the parent."""
    return [(name, kids, own)] if name in ids else kids


# The inlined fx.h geometry: fx_gid() = fx_wg() * fx_wgsize() + fx_lid() (fx_lid has no scope).
gid = node("_ZL6fx_gidv", node("_ZL5fx_wgv", [], 30) + node("_ZL9fx_wgsizev", [], 25), 50)
tiny_affine = ("_Z11tiny_affinef", [], 60)
tiny_rotl = ("_Z9tiny_rotljj", [], 40)
chain_mid = ("_Z9chain_midPKffi", [("_Z6hornerPKfif", [], 300), tiny_affine], 150)
big_mixer = ("_Z9big_mixerjj", [], 450)
shared_helper = ("_Z13shared_helperjj", [big_mixer, tiny_rotl], 120)
calls_fixture = {  # kernel -> list of (function, children, self cycles), in call order
    "k_call_chain": gid + [("_Z9chain_topPKffij", [chain_mid, chain_mid, tiny_rotl], 140)],
    "k_shared_a": gid + [shared_helper],
    "k_shared_b": gid + [shared_helper, tiny_rotl],
    "k_call_mix": gid + [tiny_affine, ("_Z16big_private_sortPKfij", [], 600), tiny_affine,
                         ("_Z16big_private_sortPKfij", [], 600), big_mixer],
}
rng = random.Random(7)


def straight_walks(only):
    """Each kernel's markers in address order (`sqtt-patch dis`), branches and calls not taken:
    [(value, instructions since the previous marker)] per kernel. An exit that would close the
    kernel scope before the kernel's last marker (one of several return paths) is skipped."""
    dis = subprocess.run([SQTT_PATCH, "dis", co], check=True, capture_output=True,
                         text=True).stdout
    walks, name, count, m0 = {}, None, 0, None
    for line in dis.splitlines():
        if line.endswith(">:") and " <" in line:
            name = line[line.index(" <") + 2:-2]
            name = name if name in kinds["U"] and (not only or name in only) else None
            if name:
                walks[name], count = [], 0
            continue
        if name is None or not line.startswith("\t"):
            continue
        inst = line.split("//")[0].split()
        count += 1
        if inst[:3] == ["s_mov_b32", "m0,"] or inst[:2] == ["s_mov_b32", "m0,"]:
            try:
                m0 = int(inst[-1], 0)
            except ValueError:
                m0 = None
        elif inst == ["s_ttracedata"] and m0 is not None:
            walks[name].append((m0, count))
            count = 0
        elif len(inst) == 2 and inst[0] == "s_ttracedata_imm":
            # gfx10+ markers of small values carry the value in the instruction.
            walks[name].append((int(inst[1], 0), count))
            count = 0
    trees = {}
    for k, marks in walks.items():
        depth, kept = 0, []
        for v, n in marks:
            if v & 3 == 2:
                depth += 1
            elif v == 1:
                if depth <= 1:
                    continue
                depth -= 1
            else:
                continue
            kept.append((v, n))
        kept += [(1, 4)] * max(depth - 1, 0)
        if kept:
            trees[k] = kept
    return trees


if all(f in ids for f in ["_Z9chain_topPKffij", "_Z13shared_helperjj", "k_call_mix"]):
    trees = calls_fixture
else:
    trees = straight_walks(set(sys.argv[3:]))


def walk(nodes, t, out):
    for name, kids, own in nodes:
        out.append((t, E(name)))
        t += int(own * rng.uniform(0.5, 1.0))
        t = walk(kids, t, out)
        t += int(own * rng.uniform(0.0, 0.5))
        out.append((t, 1))
    return t


os.makedirs(out, exist_ok=True)
shutil.copy(co, os.path.join(out, "gfx942_code_object_id_1.out"))
for n, k in enumerate(trees, start=1):
    ui = os.path.join(out, f"ui_output_agent_1_dispatch_{n}")
    os.makedirs(ui, exist_ok=True)
    occ = {"dispatches": {"1": k}, "version": "3.0.0"}
    listing = {}
    for se in range(2):
        rows, recs = [], []
        for cu in range(4):
            for slot in range(4):
                t = rng.randint(0, 300)
                for inst in range(3):
                    rows.append([t, cu, 0, slot, 1, 1])
                    if trees is calls_fixture:
                        seq = [(t + 10, E(k))]
                        end = walk(trees[k], t + 30, seq) + 20
                    else:  # the straight walk (its first marker is the kernel's): ~4 cycles
                        seq, end = [], t + 10  # per instruction
                        for v, n in trees[k]:
                            end += int(4 * n * rng.uniform(0.5, 1.5)) + 1
                            seq.append((end, v))
                        end += 20
                    seq.append((end, 1))
                    recs += [[tt, v, cu, 0, slot, 0] for tt, v in seq]
                    rows.append([end + 5, cu, 0, slot, 0, 1])
                    t = end + rng.randint(20, 200)
        recs.sort(key=lambda r: r[0])
        occ[str(se)] = sorted(rows)
        name = f"shaderdata_{se}_0.json"
        json.dump({"type": "shaderdata", "begin_time": recs[0][0], "end_time": recs[-1][0],
                   "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
                   "records_count": len(recs), "records": recs}, open(os.path.join(ui, name), "w"))
        listing[str(se)] = [[name, recs[0][0], recs[-1][0]]]
    json.dump(occ, open(os.path.join(ui, "occupancy.json"), "w"))
    json.dump({"global_begin_time": 0, "gfxv": "vega", "gfxip": 9, "version": "3.0.0",
               "counter_names": [], "wave_filenames": {}, "other_simd_filenames": {},
               "shaderdata_filenames": listing}, open(os.path.join(ui, "filenames.json"), "w"))
    # 2.1 GHz: 2.1e6 shader cycles in 1e5 ticks of a 100 MHz realtime clock.
    json.dump({"metadata": {"frequency": 100000000}, "SE0": [[0, 0], [2100000, 100000]]},
              open(os.path.join(ui, "realtime.json"), "w"))
