#!/usr/bin/env python3
"""Symbolic operand texts of AMDGPU immediates, from llvm-mc-22 (see README.md).

Writes isa-tables/symbolic/<family>.tsv with rows `kind<TAB>value<TAB>text`:
  hwreg        6-bit hwreg id -> register name (s_getreg_b32/s_setreg_b32 simm16 bits 5:0);
               ids LLVM prints numerically are omitted.
  sendmsg      s_sendmsg simm16 (0..1023) -> operand text; values LLVM prints as a plain
               decimal are omitted.
  sendmsg_rtn  s_sendmsg_rtn_b32 ssrc0 (0..255, gfx11+) -> operand text.
  mtbuf        7-bit MTBUF format field (gfx9: nfmt:dfmt) -> `format:...` text; default omitted.
Each text is what llvm-mc --disassemble prints for a word built from an assembled base
instruction with the field replaced.
Usage: symbolic.py <llvm-mc> <out-dir>
"""
import re
import subprocess
import sys

MC = sys.argv[1]
OUT = sys.argv[2]

FAMILIES = {
    "gfx9": "gfx900",
    "gfx10": "gfx1030",
    "gfx11": "gfx1100",
    "gfx12": "gfx1201",
    "gfx1250": "gfx1250",
}


def assemble(cpu, text):
    r = subprocess.run([MC, "-arch=amdgcn", f"-mcpu={cpu}", "-show-encoding"], input=text + "\n",
                       capture_output=True, text=True, check=True)
    m = re.search(r"encoding: \[([^\]]*)\]", r.stdout)
    return [int(b, 16) for b in m.group(1).split(",")]


def disassemble(cpu, lines):
    """One text per line of bytes (None where LLVM rejects the line)."""
    # Each line is followed by a sentinel s_nop so that texts can be matched to lines.
    inp = []
    for i, bs in enumerate(lines):
        s = bs + [i & 0xff, (i >> 8) & 0xff, 0x80, 0xbf]
        inp.append(" ".join(f"0x{b:02x}" for b in s))
    r = subprocess.run([MC, "-arch=amdgcn", f"-mcpu={cpu}", "--disassemble"],
                       input="\n".join(inp) + "\n", capture_output=True, text=True)
    out, cur = [], []
    for l in r.stdout.splitlines():
        l = l.strip()
        if not l or l.startswith("."):
            continue
        if l.startswith("s_nop "):
            out.append(cur[0] if len(cur) == 1 else None)
            cur = []
        else:
            cur.append(l)
    assert len(out) == len(lines), (cpu, len(out), len(lines))
    return out


def words_to_bytes(ws):
    return [b for w in ws for b in w.to_bytes(4, "little")]


def le(bs):
    return [int.from_bytes(bytes(bs[i:i + 4]), "little") for i in range(0, len(bs), 4)]


def main():
    for fam, cpu in FAMILIES.items():
        rows = []
        # hwreg: s_getreg_b32 s0, hwreg(id) (offset 0, size 32: simm16 bits 15:11 = 31).
        base = le(assemble(cpu, "s_getreg_b32 s0, hwreg(1)"))
        lines = [words_to_bytes([(base[0] & 0xffff0000) | (31 << 11) | i]) for i in range(64)]
        for i, t in enumerate(disassemble(cpu, lines)):
            m = re.search(r"hwreg\((HW_REG_[A-Z_0-9]+)\)", t or "")
            if m:
                rows.append(("hwreg", i, m.group(1)))
        # sendmsg: s_sendmsg <simm16>.
        base = le(assemble(cpu, "s_sendmsg 1"))
        lines = [words_to_bytes([(base[0] & 0xffff0000) | i]) for i in range(1024)]
        for i, t in enumerate(disassemble(cpu, lines)):
            if t and t.startswith("s_sendmsg "):
                arg = t[len("s_sendmsg "):]
                if arg != str(i):
                    rows.append(("sendmsg", i, arg))
        if fam not in ("gfx9", "gfx10"):
            base = le(assemble(cpu, "s_sendmsg_rtn_b32 s0, sendmsg(MSG_RTN_GET_DOORBELL)"))
            lines = [words_to_bytes([(base[0] & 0xffffff00) | i]) for i in range(256)]
            for i, t in enumerate(disassemble(cpu, lines)):
                if t and t.startswith("s_sendmsg_rtn_b32 s0, "):
                    rows.append(("sendmsg_rtn", i, t[len("s_sendmsg_rtn_b32 s0, "):]))
        # MTBUF format field.
        if fam != "gfx1250":
            base = le(assemble(cpu, {
                "gfx9": "tbuffer_load_format_x v0, off, s[0:3], 0",
                "gfx10": "tbuffer_load_format_x v0, off, s[0:3], 0",
                "gfx11": "tbuffer_load_format_x v0, off, s[0:3], 0",
                "gfx12": "tbuffer_load_format_x v0, off, s[0:3], null",
            }[fam]))
            (dw, lo) = {"gfx9": (0, 19), "gfx10": (0, 19), "gfx11": (0, 19), "gfx12": (1, 23)}[fam]
            lines = []
            for i in range(128):
                w = list(base)
                w[dw] = (w[dw] & ~(0x7f << lo)) | (i << lo)
                lines.append(words_to_bytes(w))
            for i, t in enumerate(disassemble(cpu, lines)):
                m = re.search(r" (format:\S+)", t or "")
                if m:
                    rows.append(("mtbuf", i, m.group(1)))
        with open(f"{OUT}/{fam}.tsv", "w") as f:
            f.write(f"# kind\tvalue\ttext (llvm-mc-22 -mcpu={cpu}; tools/isa-gen/symbolic.py)\n")
            for k, v, t in rows:
                f.write(f"{k}\t{v}\t{t}\n")


main()
