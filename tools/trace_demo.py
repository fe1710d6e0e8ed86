#!/usr/bin/env python3
"""Writes a small synthetic rocprofv3-style capture for a code object instrumented with
`--functions N --kernel-scopes`, used for the picture in docs/trace.md (the gfx942 `calls` fixture).

Usage: tools/trace_demo.py INSTRUMENTED.co OUT_DIR
The marker ids are read from the object's .sqtt_funcmap with llvm-objcopy-22: kernels are its
`U:` rows (kernel scopes), functions its `F:` rows. The kernels run on 2 shader engines x 4 CUs x
4 slots; each wave walks a call tree with jittered durations: the `calls` fixture's real call
tree when the object is that fixture, else a made-up tree over up to three of its functions.
"""
import json, os, random, shutil, subprocess, sys, tempfile

co, out = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as t:
    dump = os.path.join(t, "fm")
    subprocess.run(["/usr/lib/llvm-22/bin/llvm-objcopy", f"--dump-section=.sqtt_funcmap={dump}", co,
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
calls_fixture = {  # kernel -> list of (function, children, self cycles)
    "k_call_chain": [("_Z9chain_topPKffij", [("_Z9chain_midPKffi", [("_Z6hornerPKfif", [], 300)], 150),
                                             ("_Z11tiny_affinef", [], 80)], 120)],
    "k_call_mix": [("_Z9big_mixerjj", [("_Z9tiny_rotljj", [], 60)], 400),
                   ("_Z16big_private_sortPKfij", [], 900)],
    "k_shared_a": [("_Z13shared_helperjj", [], 250)],
    "k_shared_b": [("_Z13shared_helperjj", [], 180), ("_Z9tiny_rotljj", [], 40)],
}
rng = random.Random(7)
if all(f in ids for f in ["_Z9chain_topPKffij", "_Z13shared_helperjj", "k_call_mix"]):
    trees = calls_fixture
else:
    funcs = kinds.get("F", [])
    trees = {}
    for k in kinds["U"]:
        chain = rng.sample(funcs, min(3, len(funcs)))
        node = []
        for f in reversed(chain):
            node = [(f, node, rng.randint(50, 400))]
        trees[k] = node
def walk(nodes, t, out):
    for name, kids, own in nodes:
        out.append((t, E(name))); t += int(own * rng.uniform(0.5, 1.0))
        t = walk(kids, t, out)
        t += int(own * rng.uniform(0.0, 0.5)); out.append((t, 1))
    return t
ui = os.path.join(out, "ui_output_agent_1_dispatch_1")
os.makedirs(ui, exist_ok=True)
shutil.copy(co, os.path.join(out, "gfx942_code_object_id_1.out"))
kernels = list(trees)
occ = {"dispatches": {str(i + 1): k for i, k in enumerate(kernels)}, "version": "3.0.0"}
listing = {}
for se in range(2):
    rows, recs = [], []
    for cu in range(4):
        for slot in range(4):
            t = rng.randint(0, 50)
            for inst in range(3):
                kid = rng.randrange(len(kernels))
                k = kernels[kid]
                rows.append([t, cu, 0, slot, 1, kid + 1])
                seq = [(t + 10, E(k))]
                end = walk(trees[k], t + 30, seq) + 20
                seq.append((end, 1))
                recs += [[tt, v, cu, 0, slot, 0] for tt, v in seq]
                rows.append([end + 5, cu, 0, slot, 0, kid + 1])
                t = end + rng.randint(20, 200)
    recs.sort(key=lambda r: r[0])
    occ[str(se)] = sorted(rows)
    name = f"shaderdata_{se}_0.json"
    json.dump({"type": "shaderdata", "begin_time": recs[0][0], "end_time": recs[-1][0],
               "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
               "records_count": len(recs), "records": recs}, open(os.path.join(ui, name), "w"))
    listing[str(se)] = [[name, recs[0][0], recs[-1][0]]]
json.dump(occ, open(os.path.join(ui, "occupancy.json"), "w"))
json.dump({"global_begin_time": 0, "gfxv": "vega", "gfxip": 9, "version": "3.0.0", "counter_names": [],
           "wave_filenames": {}, "other_simd_filenames": {}, "shaderdata_filenames": listing},
          open(os.path.join(ui, "filenames.json"), "w"))
