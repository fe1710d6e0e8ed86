#!/usr/bin/env python3
"""retarget_object.py SRC DST PROCESSOR MACH

Writes a copy of the AMDGPU code object SRC to DST that names another processor of the same
instruction set: the EF_AMDGPU_MACH field (e_flags bits 7:0, ELF offset 0x30) becomes MACH and
the processor name in the `.note` section (the `amdhsa.target` string of the code object
metadata) becomes PROCESSOR, which must be as long as the old name. Nothing else changes.

Used by tools/build_fixtures.sh for processors LLVM 22 can no longer compile for (gfx940 =
0x40, gfx941 = 0x4b: gfx942 instruction set, values from LLVM 19 ELF.h).
"""
import struct
import sys

MACH_NAMES = {0x4C: b"gfx942"}


def main():
    src, dst, proc, mach = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4], 0)
    b = bytearray(open(src, "rb").read())
    assert b[:4] == b"\x7fELF" and b[4] == 2, "not an ELF64 file"
    old = MACH_NAMES[b[0x30]]
    assert len(old) == len(proc), "processor names must have the same length"
    b[0x30] = mach
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx]
    patched = 0
    for s in secs:
        start = names[4] + s[0]
        name = bytes(b[start:b.index(b"\0", start)])
        if name != b".note":
            continue
        note = bytes(b[s[4]:s[4] + s[5]])
        assert note.count(old) == 1, "expected one processor name in .note"
        at = s[4] + note.index(old)
        b[at:at + len(old)] = proc
        patched += 1
    assert patched == 1, "no .note section"
    open(dst, "wb").write(b)


if __name__ == "__main__":
    main()
