//! Compact storage of a function's decoded instructions: memory proportional to the code, not
//! to a decoded [`Instruction`] (48 bytes) per instruction.
//!
//! A function keeps its code bytes, one 8-byte record per instruction (its byte offset and the
//! index of its [`Shape`]) and one [`Instruction`] per distinct shape (a function has a few
//! hundred shapes for many thousands of instructions). Every instruction is rebuilt on demand
//! from its bytes with [`Instruction::with_bytes`], which copies the bytes and does not decode:
//! the result equals the instruction decoded at that address in every field (the contract of
//! `with_bytes`, which the unit tests below check over real code).

use amdgpu_isa::{decode_iter, DecodeError, Flow, Instruction, Shape, Target};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

/// One instruction: where its bytes start and its shape (8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rec {
    /// Byte offset of the instruction from the function's start.
    off: u32,
    /// Index into [`Insts::shapes`].
    shape: u32,
}

/// The decoded instructions of one function, in address order, stored compactly (see the module
/// documentation): about 8 bytes per instruction plus the code bytes, against 56 for an
/// `(address, Instruction)` pair. Indexing is by instruction index `0..len()`, as the analysis
/// numbers instructions; accessors taking an index panic past the end, like slice indexing.
#[derive(Debug, Clone, Default)]
pub struct Insts {
    /// Address of the first instruction (bytes).
    start: u64,
    /// The code bytes the instructions were decoded from, from `start` on.
    bytes: Box<[u8]>,
    /// Per instruction: offset and shape.
    recs: Vec<Rec>,
    /// One instruction of each distinct shape, in order of first appearance: the instruction
    /// every instruction of that shape is rebuilt from.
    shapes: Vec<Instruction>,
}

/// A multiply-rotate hasher for interning [`Shape`]s (decoder output, not adversarial input: the
/// default SipHash costs several times as much). It mixes only the word-sized writes (a shape's
/// format and opcode-row addresses and the literal's presence) and skips the byte-sized ones
/// (target, length, literal position, mode): equal shapes still hash equal, and the few shapes
/// of one opcode row that differ only in those share a bucket chain.
#[derive(Default)]
struct ShapeHasher(u64);

impl Hasher for ShapeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _: &[u8]) {}

    fn write_u8(&mut self, _: u8) {}

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn write_u64(&mut self, v: u64) {
        // 2^64 / golden ratio (Knuth TAOCP 6.4).
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Insts {
    /// Decodes `bytes` (the code of one function, its first byte at address `start`, shorter
    /// than 4 GiB: offsets are 32-bit) for `target`, instruction after instruction to the end.
    /// Errors: the first instruction that does not decode (its offset from `start` in the
    /// error).
    pub fn decode(bytes: &[u8], start: u64, target: Target) -> Result<Insts, DecodeError> {
        let mut shapes: Vec<Instruction> = Vec::new();
        let mut index: HashMap<Shape, u32, BuildHasherDefault<ShapeHasher>> = HashMap::default();
        // Every instruction is at least 4 bytes: this capacity never reallocates.
        let mut recs = Vec::with_capacity(bytes.len() / 4);
        let mut off = 0usize;
        for inst in decode_iter(bytes, target) {
            let inst = inst?;
            let shape = *index.entry(inst.shape()).or_insert_with(|| {
                shapes.push(inst);
                (shapes.len() - 1) as u32
            });
            // Below 4 GiB: the caller's contract (the analysis refuses larger functions).
            recs.push(Rec {
                off: off as u32,
                shape,
            });
            off += inst.len();
        }
        recs.shrink_to_fit();
        shapes.shrink_to_fit();
        Ok(Insts {
            start,
            bytes: bytes.into(),
            recs,
            shapes,
        })
    }

    /// The instructions `insts` (built for one target), placed one after the other from address
    /// `start` (bytes): the store of code built in memory rather than decoded.
    #[cfg(test)]
    pub(crate) fn from_instructions(start: u64, insts: &[Instruction]) -> Insts {
        let Some(first) = insts.first() else {
            return Insts::default();
        };
        let bytes: Vec<u8> = insts.iter().flat_map(|i| i.bytes().to_vec()).collect();
        let out = Insts::decode(&bytes, start, first.target()).expect("built instructions decode");
        assert_eq!(
            out.len(),
            insts.len(),
            "built instructions decode one to one"
        );
        out
    }

    /// Number of instructions.
    #[inline]
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    /// No instruction.
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// Number of distinct shapes among the instructions.
    pub fn shape_count(&self) -> usize {
        self.shapes.len()
    }

    /// Address of instruction `i` (bytes). Panics when `i >= len()`.
    #[inline]
    pub fn addr(&self, i: usize) -> u64 {
        self.start + u64::from(self.recs[i].off)
    }

    /// Address of instruction `i` (bytes), `None` past the end.
    #[inline]
    pub fn checked_addr(&self, i: usize) -> Option<u64> {
        self.recs.get(i).map(|r| self.start + u64::from(r.off))
    }

    /// Instruction `i`, rebuilt from its bytes. Panics when `i >= len()`.
    #[inline]
    pub fn get(&self, i: usize) -> Instruction {
        self.rebuild(self.recs[i])
    }

    /// Address (bytes) and instruction `i`. Panics when `i >= len()`.
    #[inline]
    pub fn at(&self, i: usize) -> (u64, Instruction) {
        let r = self.recs[i];
        (self.start + u64::from(r.off), self.rebuild(r))
    }

    /// Control flow of instruction `i` ([`Instruction::flow`], a property of the opcode and so
    /// of the shape: read from the shape table, nothing rebuilt). Panics when `i >= len()`.
    #[inline]
    pub fn flow(&self, i: usize) -> Flow {
        self.shapes[self.recs[i].shape as usize].flow()
    }

    /// Length of instruction `i` in bytes (part of its shape: nothing rebuilt). Panics when
    /// `i >= len()`.
    #[inline]
    pub fn size(&self, i: usize) -> usize {
        self.shapes[self.recs[i].shape as usize].len()
    }

    /// The last instruction, `None` when there is none.
    pub fn last(&self) -> Option<Instruction> {
        self.recs.last().map(|&r| self.rebuild(r))
    }

    /// Every instruction with its address (bytes), in order.
    #[inline]
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = (u64, Instruction)> + ExactSizeIterator + Clone + '_ {
        self.range(0..self.len())
    }

    /// The instructions of indices `r` with their addresses (bytes), in order. Panics when `r`
    /// reaches past the end.
    #[inline]
    pub fn range(
        &self,
        r: Range<usize>,
    ) -> impl DoubleEndedIterator<Item = (u64, Instruction)> + ExactSizeIterator + Clone + '_ {
        self.recs[r]
            .iter()
            .map(|&r| (self.start + u64::from(r.off), self.rebuild(r)))
    }

    /// Index of the instruction starting at address `a` (bytes), `None` when no instruction
    /// starts there.
    pub fn index_of(&self, a: u64) -> Option<usize> {
        let off = u32::try_from(a.checked_sub(self.start)?).ok()?;
        self.recs.binary_search_by_key(&off, |r| r.off).ok()
    }

    /// Number of instructions starting below address `a` (bytes): the index of the first one at
    /// or after `a`.
    pub fn partition_point(&self, a: u64) -> usize {
        self.recs
            .partition_point(|r| self.start + u64::from(r.off) < a)
    }

    /// The instruction of record `r`: its shape over its bytes.
    #[inline]
    fn rebuild(&self, r: Rec) -> Instruction {
        let bytes = self.bytes.get(r.off as usize..).unwrap_or_default();
        self.shapes[r.shape as usize].with_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::build::{self, Operand};
    use amdgpu_isa::decode;

    /// Every instruction of the store equals a fresh decode at its address, in every field the
    /// rewriter reads, and iteration, indexing and address lookup agree.
    fn check(code: &[u8], start: u64, target: Target) -> Insts {
        let insts = Insts::decode(code, start, target).unwrap();
        let mut a = start;
        for (i, (ia, inst)) in insts.iter().enumerate() {
            let fresh = decode(&code[(a - start) as usize..], target).unwrap();
            assert_eq!(ia, a);
            assert_eq!(insts.addr(i), a);
            assert_eq!(insts.checked_addr(i), Some(a));
            assert_eq!(insts.index_of(a), Some(i));
            assert_eq!(insts.partition_point(a), i);
            assert_eq!(inst.bytes(), fresh.bytes());
            assert_eq!(inst.shape(), fresh.shape());
            assert_eq!(inst.to_string(), fresh.to_string());
            assert_eq!(inst.special(), fresh.special());
            assert_eq!(inst.flow(), fresh.flow());
            assert_eq!(inst.literal(), fresh.literal());
            assert_eq!(inst.branch_target(a), fresh.branch_target(a));
            assert_eq!(inst.reads_writes(), fresh.reads_writes());
            assert_eq!(insts.get(i).bytes(), fresh.bytes());
            assert_eq!(insts.flow(i), fresh.flow());
            assert_eq!(insts.size(i), fresh.len());
            assert_eq!(insts.at(i).1.bytes(), fresh.bytes());
            a += fresh.len() as u64;
        }
        assert_eq!(a, start + code.len() as u64);
        assert_eq!(insts.checked_addr(insts.len()), None);
        assert_eq!(insts.partition_point(a), insts.len());
        assert_eq!(
            insts.last().map(|i| i.bytes().to_vec()),
            insts.iter().last().map(|(_, i)| i.bytes().to_vec())
        );
        insts
    }

    #[test]
    fn mixed_lengths_and_literals_rebuild_exactly() {
        let t = Target::from_name("gfx1100").unwrap();
        let (s4, s5) = (Operand::Sgpr(4), Operand::Sgpr(5));
        let code: Vec<Instruction> = vec![
            build::s_getpc_b64(t, 4).unwrap(),
            build::s_add_u32(t, s4, s4, Operand::Literal(0x1234_5678)).unwrap(),
            build::s_addc_u32(t, s5, s5, Operand::Literal(0)).unwrap(),
            build::s_nop(t, 0).unwrap(),
            build::s_add_u32(t, s4, s4, Operand::Literal(0xdead_beef)).unwrap(),
            build::s_nop(t, 3).unwrap(),
            build::s_cbranch_scc0(t, -3).unwrap(),
            build::s_ttracedata_imm(t, 7).unwrap(),
        ];
        let bytes: Vec<u8> = code.iter().flat_map(|i| i.bytes().to_vec()).collect();
        let insts = check(&bytes, 0x1000, t);
        assert_eq!(insts.len(), code.len());
        // Equal shapes share one table entry: the adds differ only in operand bits, and so do
        // the nops.
        assert_eq!(insts.shape_count(), 6);
        assert_eq!(insts.get(4).literal(), Some(0xdead_beef));
        assert_eq!(insts.get(5).bytes(), code[5].bytes());
        // Between and outside instructions.
        assert_eq!(insts.index_of(0x1002), None);
        assert_eq!(insts.index_of(0xffc), None);
        assert_eq!(insts.partition_point(0x1002), 1);
        assert_eq!(insts.partition_point(0), 0);
        assert_eq!(
            Insts::from_instructions(0x1000, &code)
                .iter()
                .map(|(a, i)| (a, i.bytes().to_vec()))
                .collect::<Vec<_>>(),
            insts
                .iter()
                .map(|(a, i)| (a, i.bytes().to_vec()))
                .collect::<Vec<_>>()
        );
        let empty = Insts::decode(&[], 0x1000, t).unwrap();
        assert!(empty.is_empty() && empty.last().is_none() && empty.iter().next().is_none());
        // The first undecodable word fails the whole function, at its offset.
        let mut bad = bytes.clone();
        bad.extend_from_slice(&[0xff; 4]);
        assert!(Insts::decode(&bad, 0x1000, t).is_err());
    }

    /// Every kernel of one real fixture object per target (`*__memory__O3.co`, compiled by
    /// LLVM): the store rebuilds each instruction as a fresh decode gives it.
    #[test]
    fn real_functions_rebuild_as_decoded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/objects");
        let mut checked = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if !path.to_string_lossy().ends_with("__memory__O3.co") {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(co) = hsaco::CodeObject::parse(&bytes) else {
                continue;
            };
            let Some(target) = Target::from_elf_mach(u32::from(co.target.mach)) else {
                continue;
            };
            let Some(text) = co.text() else { continue };
            let code = co.section_data(text);
            for k in &co.kernels {
                let lo = (k.entry - text.addr) as usize;
                let Some(size) = k.code_size.filter(|&s| s > 0) else {
                    continue;
                };
                let Some(f) = code.get(lo..lo + size as usize) else {
                    continue;
                };
                if decode_iter(f, target).all(|r| r.is_ok()) {
                    let insts = check(f, k.entry, target);
                    assert!(insts.shape_count() <= insts.len());
                    checked += insts.len();
                }
            }
        }
        assert!(checked > 1000, "only {checked} instructions checked");
    }
}
