#!/usr/bin/env python3
"""Writes a small synthetic rocprofv3-style capture for a code object instrumented with
`--functions N --kernel-scopes`, used for the pictures in README.md and docs/trace.md. It is not
a GPU run: no instruction is executed and no data is read; each wave replays one path through
the instrumented code and records the markers met on it.

Usage: tools/trace_demo.py INSTRUMENTED.co OUT_DIR [KERNEL...]
(tools/draw_pictures.sh runs it for the README's pictures.)

The marker ids are read from the object's .sqtt_funcmap with llvm-objcopy-22 (on PATH): kernels
are its `U:` rows (kernel scopes). The code is read from `sqtt-patch dis` (the binary named by
$SQTT_PATCH, else `sqtt-patch` on PATH). For each KERNEL named (mangled), or every kernel, one path
is walked from the kernel's entry, by these rules (a control-flow path, not an execution):
- a conditional branch that jumps forward is not taken (the `then` side of an `if` runs);
- a loop's back edge (a branch to a lower address) is taken LOOP_TRIPS times each time the loop
  is entered, so its body runs LOOP_TRIPS + 1 times; its branches' counts restart then, so an
  inner loop runs as often in every iteration of the outer one; a loop closed by an
  unconditional back edge is left, once its trips are used, by the way out of its natural loop
  that is shortest;
- an instruction met more than MAX_VISITS times (a cycle these rules do not leave, such as a
  spin-wait whose way out is a forward branch) sends the path the shortest way to its function's
  end (counted on stderr as "hurried to the end");
- a call (`s_swappc_b64` to an address built by `s_getpc_b64` + `s_add_u32`/`s_addc_u32` of
  constants, or `s_call_b64`) is followed into the callee, which meets its own `F:` enter and
  exit markers; the callee's `s_setpc_b64` returns to the instruction after the call; an
  `s_setpc_b64` to a built address is a tail call, followed; a call or jump whose target is not
  built that way is not followed (counted on stderr);
- `s_endpgm` (or the return of the kernel's frame) ends the path; so does a path longer than
  MAX_STEPS instructions, or calls nested more than MAX_CALL_DEPTH deep (then the open scopes are
  closed at the end, and stderr says so).
Markers are the `s_ttracedata` after an `s_mov_b32 m0, <constant>` and gfx10+
`s_ttracedata_imm`. Time: about 4 cycles per instruction between markers, jittered per wave.
An exit that would close the kernel scope before the path's end is skipped.

Each kernel is one dispatch (`ui_output_agent_1_dispatch_<n>/`, as rocprofv3 writes them) on 2
shader engines x 4 CUs x 4 slots, 3 wave instances per slot, every wave on the same path.
`realtime.json` gives a 2.1 GHz shader clock. The jitter is seeded: the same object gives the
same capture.
"""
import json, os, random, shutil, subprocess, sys, tempfile

LOOP_TRIPS = 2
MAX_STEPS = 200_000
MAX_CALL_DEPTH = 32
MAX_VISITS = 1000
MASK = 0xFFFFFFFF

if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
    sys.exit("usage: tools/trace_demo.py INSTRUMENTED.co OUT_DIR [KERNEL...]")
co, out = sys.argv[1], sys.argv[2]
SQTT_PATCH = os.environ.get("SQTT_PATCH", "sqtt-patch")


def run(args):
    """stdout of `args`; a missing program or a failure ends the script with a message."""
    try:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit(f"trace_demo.py: {args[0]} not found (set $SQTT_PATCH or PATH)")
    except subprocess.CalledProcessError as e:
        sys.exit(f"trace_demo.py: {' '.join(args)} failed: {e.stderr.strip()}")


with tempfile.TemporaryDirectory() as t:
    dump = os.path.join(t, "fm")
    run(["llvm-objcopy-22", f"--dump-section=.sqtt_funcmap={dump}", co, os.path.join(t, "o")])
    text = open(dump, "rb").read().decode(errors="replace").replace("\0", "\n")
kernels = []
for line in text.splitlines():
    p = line.split(":", 2)
    if len(p) == 3 and p[0] == "U":
        kernels.append(p[2].split("@")[0])
if not kernels:
    sys.exit(f"{co}: no kernel scopes in .sqtt_funcmap: instrument with --kernel-scopes")


def read_code():
    """Every instruction of `sqtt-patch dis`: {address: (mnemonic, operands, next address)}, and
    {symbol: address}."""
    dis = run([SQTT_PATCH, "dis", co])
    code, symbols = {}, {}
    for line in dis.splitlines():
        if line.endswith(">:") and " <" in line:
            symbols[line[line.index(" <") + 2:-2]] = int(line.split()[0], 16)
            continue
        if not line.startswith("\t") or "//" not in line:
            continue
        inst, enc = line[1:].rsplit("//", 1)
        addr, words = enc.split(":", 1)
        inst = inst.split()
        ops = [o.rstrip(",") for o in inst[1:]]
        a = int(addr, 16)
        code[a] = (inst[0] if inst else "", ops, a + 4 * len(words.split()))
    return code, symbols


def sregs(op):
    """The SGPR numbers an operand names (`s7`, `s[6:7]`), else []."""
    if op.startswith("s[") and op.endswith("]") and ":" in op:
        lo, hi = op[2:-1].split(":")
        return list(range(int(lo), int(hi) + 1)) if lo.isdigit() and hi.isdigit() else []
    return [int(op[1:])] if op[:1] == "s" and op[1:].isdigit() else []


def const(op):
    """An operand's constant value (`0x10`, `lit(0xffffffff)`, `-1`) as 32 bits, else None."""
    op = op[4:-1] if op.startswith("lit(") and op.endswith(")") else op
    try:
        return int(op, 0) & MASK
    except ValueError:
        return None


def branch_target(ops, nxt):
    """The target of a branch whose first operand is its 16-bit signed dword offset (as `sqtt-patch
    dis` prints it, unsigned), else None (gfx8's `s_cbranch_join` and the like)."""
    try:
        v = int(ops[0], 0) if ops else None
    except ValueError:
        return None
    if v is None or not 0 <= v <= 0xFFFF:
        return None
    return nxt + 4 * (v - 0x10000 if v >= 0x8000 else v)


def successors(code, pc):
    """The addresses control can go to after the instruction at `pc` within its function (a
    call returns to the next instruction; a return, `s_endpgm` or a branch of unknown target
    goes nowhere)."""
    mn, ops, nxt = code[pc]
    if mn == "s_branch" or mn.startswith("s_cbranch_"):
        dest = branch_target(ops, nxt)
        return [] if dest is None else [dest] if mn == "s_branch" else [nxt, dest]
    if mn == "s_setpc_b64" or mn.startswith("s_endpgm") or mn == "s_code_end":
        return []
    return [nxt]


def loop_body(code, preds, head, tail):
    """The natural loop of the back edge `tail` -> `head`: `head` and every instruction that
    reaches `tail` without passing `head` (backwards over `preds`)."""
    body, todo = {head, tail}, [tail]
    while todo:
        for b in preds.get(todo.pop(), ()):
            if b not in body:
                body.add(b)
                todo.append(b)
    return body


def steps_out(code, start, body, limit=100_000):
    """Instructions from `start` to the first one outside `body` or to a return or `s_endpgm`
    (breadth-first over `successors`); `limit` when there is no way out."""
    seen, level, n = {start}, [start], 0
    while level and n < limit:
        if any(a not in body for a in level):
            return n
        nxt_level = []
        for a in level:
            if a in code and not successors(code, a):
                return n + 1  # the path ends here: out too
            for b in successors(code, a) if a in code else []:
                if b not in seen:
                    seen.add(b)
                    nxt_level.append(b)
        level, n = nxt_level, n + 1
    return limit


def steps_to_end(code, preds):
    """For every instruction, the fewest instructions from it to a return, `s_endpgm` or branch
    of unknown target of its function (breadth-first backwards over `preds`); missing when
    there is no way."""
    level = [a for a in code if not successors(code, a)]
    dist = dict.fromkeys(level, 0)
    while level:
        nxt_level = []
        for a in level:
            for b in preds.get(a, ()):
                if b not in dist:
                    dist[b] = dist[a] + 1
                    nxt_level.append(b)
        level = nxt_level
    return dist


def walk_path(code, preds, to_end, entry):
    """One path from `entry` by the rules of the module doc: [(marker value, instructions since
    the previous marker)], and what was not followed or cut."""
    marks, count, pc = [], 0, entry
    regs, scc, m0 = {}, 0, None  # known SGPR values (from s_getpc_b64 and constant adds)
    stack, trips, leaving, visits, hurry = [], {}, [], {}, None
    notes = {"calls followed": 0, "calls not followed": 0, "cut": None}
    steps = 0
    while pc in code:
        steps += 1
        if steps > MAX_STEPS:
            notes["cut"] = f"longer than {MAX_STEPS} instructions"
            break
        mn, ops, nxt = code[pc]
        count += 1
        while leaving and leaving[-1][1] >= len(stack) and pc not in leaving[-1][0]:
            leaving.pop()  # the loop was left another way
        visits[pc] = visits.get(pc, 0) + 1
        if hurry is not None and len(stack) < hurry:
            hurry = None  # the frame that hurried has returned
        if hurry is None and visits[pc] > MAX_VISITS:
            hurry = len(stack)  # a cycle these rules do not leave: head for the end
            notes["hurried to the end"] = notes.get("hurried to the end", 0) + 1
        target = None
        if mn == "s_ttracedata" and m0 is not None:
            marks.append((m0, count))
            count = 0
        elif mn == "s_ttracedata_imm" and ops:
            marks.append((int(ops[0], 0), count))
            count = 0
        elif mn == "s_mov_b32" and ops[:1] == ["m0"]:
            m0 = const(ops[1])
        elif mn == "s_getpc_b64" and len(sregs(ops[0])) == 2:
            r = sregs(ops[0])
            regs[r[0]], regs[r[1]] = nxt & MASK, nxt >> 32
        elif mn in ("s_add_u32", "s_add_co_u32") and len(ops) == 3:
            a, k, d = sregs(ops[1]), const(ops[2]), sregs(ops[0])
            if len(a) == 1 and a[0] in regs and k is not None and len(d) == 1:
                s = regs[a[0]] + k
                regs[d[0]], scc = s & MASK, s >> 32
            else:
                for r in d:
                    regs.pop(r, None)
        elif mn in ("s_addc_u32", "s_add_co_ci_u32") and len(ops) == 3:
            a, k, d = sregs(ops[1]), const(ops[2]), sregs(ops[0])
            if len(a) == 1 and a[0] in regs and k is not None and len(d) == 1:
                regs[d[0]] = (regs[a[0]] + k + scc) & MASK
            else:
                for r in d:
                    regs.pop(r, None)
        elif mn in ("s_swappc_b64", "s_setpc_b64"):
            src = sregs(ops[-1])
            known = len(src) == 2 and src[0] in regs and src[1] in regs
            dest = (regs[src[1]] << 32 | regs[src[0]]) if known else None
            if mn == "s_swappc_b64":
                if dest in code and len(stack) < MAX_CALL_DEPTH:
                    notes["calls followed"] += 1
                    stack.append(nxt)
                    target = dest
                elif dest in code:
                    notes["cut"] = f"calls nested more than {MAX_CALL_DEPTH} deep"
                    break
                else:
                    notes["calls not followed"] += 1
            elif dest in code:  # a tail call
                target = dest
            elif not stack:  # the kernel's frame returns: the end of the path
                break
            else:  # a return
                target = stack.pop()
        elif mn == "s_call_b64":
            dest = branch_target(ops[1:], nxt)
            if dest in code and len(stack) < MAX_CALL_DEPTH:
                notes["calls followed"] += 1
                stack.append(nxt)
                target = dest
            else:
                notes["calls not followed"] += 1
        elif mn.startswith("s_endpgm") or mn == "s_code_end":
            break
        elif mn == "s_branch" or mn.startswith("s_cbranch_"):
            dest = branch_target(ops, nxt)
            cond = mn != "s_branch"
            if dest is None:
                notes["cut"] = f"{mn} at {pc:#x}: target not a constant offset"
                break
            far = len(code)
            if hurry == len(stack) and cond:
                if to_end.get(dest, far) < to_end.get(nxt, far):
                    target = dest
            elif leaving and leaving[-1][1] == len(stack) and cond:
                body = leaving[-1][0]  # leaving a loop: the way out that is shortest
                if steps_out(code, dest, body) < steps_out(code, nxt, body):
                    target = dest
            elif dest <= pc:  # a loop's back edge
                done = trips.get(pc, 0)
                if done < LOOP_TRIPS or not cond:
                    trips[pc] = done + 1 if done < LOOP_TRIPS else 0
                    if done >= LOOP_TRIPS:  # leave by the shortest way out of the loop
                        leaving.append((loop_body(code, preds, dest, pc), len(stack)))
                    for b in [b for b in trips if dest <= b < pc]:
                        del trips[b]
                    target = dest
                else:
                    trips[pc] = 0
            elif not cond:
                target = dest
        elif ops and mn[:2] in ("s_", "v_"):
            for r in sregs(ops[0]):  # any other write to an SGPR forgets its value
                regs.pop(r, None)
        pc = nxt if target is None else target
    if marks and marks[-1][0] == 1:  # the kernel scope's exit: written at the wave's end
        marks.pop()
    depth, kept = 0, []
    for v, n in marks:
        if v & 3 == 2:
            depth += 1
        elif v == 1:
            if depth <= 1:
                notes["early exits skipped"] = notes.get("early exits skipped", 0) + 1
                continue
            depth -= 1
        else:
            continue
        kept.append((v, n))
    if depth > 1:
        notes["open scopes closed at the end"] = depth - 1
    return kept + [(1, 4)] * max(depth - 1, 0), notes


code, symbols = read_code()
preds = {}
for a in code:
    for b in successors(code, a):
        preds.setdefault(b, []).append(a)
to_end = steps_to_end(code, preds)
only = set(sys.argv[3:])
missing = sorted(only - set(kernels))
if missing:
    sys.exit(f"{co}: no kernel scope for {', '.join(missing)} in .sqtt_funcmap")
paths = {}
for k in kernels:
    if (only and k not in only) or k not in symbols:
        continue
    path, notes = walk_path(code, preds, to_end, symbols[k])
    if path:
        paths[k] = path
    said = "".join(f"; {n}: {v}" for n, v in notes.items() if v)
    print(f"{k}: {len(path)} markers on the path{said}", file=sys.stderr)
if not paths:
    sys.exit(f"{co}: no kernel's path met a marker")
rng = random.Random(7)

os.makedirs(out, exist_ok=True)
shutil.copy(co, os.path.join(out, "gfx942_code_object_id_1.out"))
for n, k in enumerate(paths, start=1):
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
                    seq, end = [], t + 10  # about 4 cycles per instruction
                    for v, gap in paths[k]:
                        end += int(4 * gap * rng.uniform(0.5, 1.5)) + 1
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
