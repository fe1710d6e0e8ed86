//! Decoding of one original function and the interning of its shapes and registers before
//! alignment.

use std::collections::HashMap;

use amdgpu_isa::{decode, Instruction, Special, Target};

use amdgpu_isa::{RegSet, SpecialReg};

use super::align::align;
use super::{find_builders, BuildRegsHasher, Func, NInst, Regs, Text};
use crate::program::insn::{is_padding, region_class_regs, Region};
use crate::{Finding, VerifyError};

pub(super) fn count_code_end(bytes: &[u8], isa: Target) -> usize {
    let mut off = 0;
    let mut n = 0;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let Ok(i) = decode(rest, isa) else { break };
        if i.special() == Special::CodeEnd {
            n += 1;
        }
        off += i.len();
    }
    n
}

/// End of a symbol-less (or zero-sized) function: its region minus trailing padding words.
pub(super) fn trim_padding(t: &Text<'_>, start: u64, end: u64, isa: Target) -> u64 {
    let mut off = 0;
    let bytes = t.slice(start, end);
    let mut last_real = 0;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let Ok(i) = decode(rest, isa) else { return end };
        off += i.len();
        if !is_padding(&i) {
            last_real = off;
        }
    }
    start + last_real as u64
}

/// Decodes the original body of function `fi`, the registers of its instructions, and aligns
/// its rewritten copy with it ([`align`]); then the registers and classes of its inserted code.
/// `falls_off_allowed`: a body whose last instruction falls through is marked as running off
/// its end ([`Func::falls_off`]); `false` for one that ends in a call of a function that never
/// returns. Returns the alignment findings; errors: the body does not decode.
pub(super) fn prepare(
    f: &mut Func,
    fi: usize,
    ostarts: &[u64],
    otext: &Text<'_>,
    isa: Target,
    falls_off_allowed: bool,
) -> Result<Vec<Finding>, VerifyError> {
    let body = decode_original(otext, f, isa)?;
    let mut used = RegSet::new();
    let mut table: Vec<Regs> = Vec::new();
    let mut index: HashMap<Regs, u32, BuildRegsHasher> = HashMap::default();
    let mut shapes: HashMap<amdgpu_isa::Shape, u32, BuildRegsHasher> = HashMap::default();
    // The registers, and whether the aligner may take the instruction for inserted
    // code (`insertable_regs`), are functions of the encoding (one target per
    // object): an instruction with the bytes of an earlier one of the function (most
    // of them) takes both without a decode of its operands. `used` is a union, so
    // the distinct encodings' registers give it.
    // Sized for a quarter of the body distinct (no rehash on most functions).
    // The shape (`Func::shapes`) is one too.
    // Keyed by the encoding as integers (`encoding_key`): hashed in two steps and
    // compared without a byte loop.
    let mut by_bytes: HashMap<EncodingKey, ((u32, u32), bool), BuildRegsHasher> =
        HashMap::with_capacity_and_hasher(body.len() / 4, Default::default());
    let mut facts = |i: &Instruction| {
        let (r, w) = i.reads_writes();
        used.union_with(&r);
        used.union_with(&w);
        let x = Regs::of(i, &r, &w);
        let k = *index.entry(x).or_insert_with(|| {
            table.push(x);
            (table.len() - 1) as u32
        });
        let s = *shapes.entry(i.shape()).or_insert_with(|| {
            f.shapes.push(*i);
            (f.shapes.len() - 1) as u32
        });
        ((s, k), crate::program::insn::insertable_regs(i, &x))
    };
    let (index_of, body_ins): (Vec<(u32, u32)>, Vec<bool>) = body
        .iter()
        .map(|(_, i)| match encoding_key(i.bytes()) {
            Some(key) => *by_bytes.entry(key).or_insert_with(|| facts(i)),
            None => facts(i),
        })
        .unzip();
    drop(index);
    drop(shapes);
    drop(by_bytes);
    table.shrink_to_fit();
    f.shapes.shrink_to_fit();
    if falls_off_allowed && crate::program::falls_off(&body) {
        let next = ostarts.get(fi + 1).copied().unwrap_or(otext.end());
        f.falls_off = Some(next.saturating_sub(f.orig_end));
    }
    f.builders = find_builders(&body);
    f.orig_used = used;
    let mut found = Vec::new();
    align(f, body, index_of, &body_ins, isa, &mut found);
    // Grown by pushes (up to twice the size): kept for every later check.
    f.inserted.shrink_to_fit();
    f.padding.shrink_to_fit();
    f.regs_table = table;
    // Registers and class are functions of the encoding: decoded once per distinct
    // encoding of the function's inserted code.
    let mut by_bytes: HashMap<&[u8], (u32, Option<Region>), BuildRegsHasher> = HashMap::default();
    let mut table: Vec<Regs> = Vec::new();
    let mut index: HashMap<Regs, u32, BuildRegsHasher> = HashMap::default();
    let (at, class): (Vec<u32>, Vec<Option<Region>>) = f
        .inserted
        .iter()
        .map(|n| {
            *by_bytes.entry(n.inst.bytes()).or_insert_with(|| {
                let r = Regs::of_inst(&n.inst);
                let k = *index.entry(r).or_insert_with(|| {
                    table.push(r);
                    (table.len() - 1) as u32
                });
                (k, region_class_regs(&n.inst, &r))
            })
        })
        .unzip();
    drop(by_bytes);
    f.inserted_regs_at = at;
    f.inserted_class = class;
    f.inserted_regs_table = table;
    Ok(found)
}

pub(super) fn decode_original(
    t: &Text<'_>,
    f: &Func,
    isa: Target,
) -> Result<Vec<(u64, Instruction)>, VerifyError> {
    let bytes = t.slice(f.orig_start, f.orig_end);
    // Every instruction is at least 4 bytes: no reallocation (untouched capacity of a large
    // body is never paged in).
    let mut out = Vec::with_capacity(bytes.len() / 4);
    let mut off = 0usize;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let addr = f.orig_start + off as u64;
        let i = decode(rest, isa).map_err(|e| VerifyError::OriginalDecode {
            function: f.name.clone(),
            address: addr,
            offset: t.offset + (addr - t.addr),
            detail: e.kind.to_string(),
        })?;
        off += i.len();
        out.push((addr, i));
    }
    Ok(out)
}

/// Whether landing at instruction `p` of the inserted run `run` enters a marker after the write of
/// its M0 value: the first `s_ttracedata` from `p` on, before any M0 write from `p` on, would
/// send an M0 that an instruction before `p` set (issue 37: a jump re-aimed 4 bytes into a
/// marker). Landing at the start of a marker, or on the original instruction, stays allowed.
pub(super) fn splits_marker(run: &[NInst], p: usize) -> bool {
    let set_before = run[..p]
        .iter()
        .any(|n| n.inst.writes().contains(SpecialReg::M0));
    if !set_before {
        return false;
    }
    for n in &run[p..] {
        if n.inst.writes().contains(SpecialReg::M0) {
            return false;
        }
        if n.inst.special() == Special::TtraceData {
            return true;
        }
    }
    false
}

/// An encoding of up to 16 bytes as a map key ([`encoding_key`]).
pub(super) type EncodingKey = (u128, u64);

/// An encoding of up to 16 bytes as a map key: the bytes zero-padded into a little-endian
/// `u128`, and the length (bytes), so encodings that differ only in trailing zero bytes differ.
/// `None` for a longer encoding (MIMG NSA, gfx950/gfx1250 two-part instructions: rare).
pub(super) fn encoding_key(b: &[u8]) -> Option<EncodingKey> {
    let mut w = [0u8; 16];
    w.get_mut(..b.len())?.copy_from_slice(b);
    Some((u128::from_le_bytes(w), b.len() as u64))
}
