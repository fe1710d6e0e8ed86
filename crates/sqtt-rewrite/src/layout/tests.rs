//! Unit tests of the layout: landing blocks, long-branch islands, address maps.
use super::*;
use crate::insts::Insts;
use amdgpu_isa::build;
use amdgpu_isa::decode;
use std::ops::Range;

/// The original code of [`plan`]: `s_cbranch_scc0` at 0x1000, then `s_nop 0`s.
struct Code {
    insts: Insts,
    marker: [Instruction; 1],
}

fn code(t: Target, nops: usize) -> Code {
    let mut insts = vec![build::s_cbranch_scc0(t, 0).unwrap()];
    insts.resize(nops + 1, build::s_nop(t, 0).unwrap());
    Code {
        insts: Insts::from_instructions(0x1000, &insts),
        marker: [build::s_ttracedata_imm(t, 1).unwrap()],
    }
}

/// `c.branch` at 0x1000 with a landing block `{s_ttracedata_imm 1; jump}` to the `s_nop 0`
/// at `target`, then `c.nops` as one run.
fn plan(c: &Code, t: Target, target: u64, long: bool) -> TextPlan<'_> {
    let pieces = vec![
        Piece::Orig {
            insts: &c.insts,
            i: 0,
            reloc: Reloc::ToIsland { island: 0 },
        },
        Piece::Island {
            from: 0x1000,
            target,
            markers: c.marker.to_vec(),
            long,
            pair: 4,
            isa: t,
            skip: true,
        },
        Piece::Run {
            insts: &c.insts,
            range: 1..c.insts.len(),
            relocs: &[],
        },
    ];
    TextPlan {
        text_addr: 0x1000,
        out_addr: 0x1000,
        kept: Vec::new(),
        pieces,
        pcrels: Vec::new(),
    }
}

fn at(l: &Layout, a: u64) -> Instruction {
    let off = (a - 0x1000) as usize;
    decode(&l.bytes[off..], Target::from_name("gfx1100").unwrap()).unwrap()
}

#[test]
fn landing_block_runs_its_markers_then_jumps_to_the_target() {
    let t = Target::from_name("gfx1100").unwrap();
    let l = lay_out(&plan(&code(t, 4), t, 0x1008, false)).unwrap();
    // branch → block at 0x1008 (after the skip); skip → the first original after the block.
    assert_eq!(at(&l, 0x1000).branch_target(0x1000), Some(0x1008));
    assert_eq!(at(&l, 0x1004).mnemonic(), "s_branch");
    assert_eq!(at(&l, 0x1004).branch_target(0x1004), Some(0x1010));
    assert_eq!(
        at(&l, 0x1008).special(),
        amdgpu_isa::Special::TtraceDataImm(1)
    );
    let dest = l.map_branch(0x1008).unwrap();
    assert_eq!(at(&l, 0x100c).branch_target(0x100c), Some(dest));
    assert_eq!(l.new_inst_addr(0x1004), Some(0x1010));
}

#[test]
fn far_landing_block_is_out_of_range_until_its_jump_is_long() {
    let t = Target::from_name("gfx1100").unwrap();
    // 40,000 dwords: beyond simm16.
    let target = 0x1004 + 4 * 39_999;
    let c = code(t, 40_000);
    assert_eq!(
        lay_out(&plan(&c, t, target, false)).unwrap_err(),
        LayoutError::OutOfRange { at: vec![0x1000] }
    );
    let l = lay_out(&plan(&c, t, target, true)).unwrap();
    assert_eq!(
        at(&l, 0x1008).special(),
        amdgpu_isa::Special::TtraceDataImm(1)
    );
    // s_getpc_b64 s[4:5] at 0x100c; the adds' literals carry the offset from 0x1010.
    assert_eq!(at(&l, 0x100c).mnemonic(), "s_getpc_b64");
    let lo = at(&l, 0x1010).literal().unwrap();
    let hi = at(&l, 0x1018).literal().unwrap();
    let dest = 0x1010u64.wrapping_add((hi << 32) | lo);
    assert_eq!(Some(dest), l.map_branch(target));
    let skip = at(&l, 0x1004).branch_target(0x1004).unwrap();
    assert_eq!(Some(skip), l.new_inst_addr(0x1004));
}

/// A function whose last instruction is a relaxed backward `s_branch` (issue 39 item 4):
/// its long form trails it and belongs to it, so the function's end maps past the island
/// (symbol size, DWARF, the verifier's extent), while the branch itself keeps its address.
#[test]
fn island_after_the_last_instruction_is_inside_the_function_end() {
    let t = Target::from_name("gfx1100").unwrap();
    let mut v = vec![build::s_nop(t, 0).unwrap(); 3];
    v.push(build::s_branch(t, 0).unwrap());
    let insts = Insts::from_instructions(0x1000, &v);
    let plan = TextPlan {
        text_addr: 0x1000,
        out_addr: 0x1000,
        kept: Vec::new(),
        pieces: vec![
            Piece::Run {
                insts: &insts,
                range: 0..3,
                relocs: &[],
            },
            Piece::Orig {
                insts: &insts,
                i: 3,
                reloc: Reloc::ToIsland { island: 0 },
            },
            Piece::Island {
                from: 0x100c,
                target: 0x1000,
                markers: Vec::new(),
                long: true,
                pair: 4,
                isa: t,
                skip: false,
            },
        ],
        pcrels: Vec::new(),
    };
    let l = lay_out(&plan).unwrap();
    assert_eq!(at(&l, 0x100c).branch_target(0x100c), Some(0x1010));
    assert_eq!(at(&l, 0x1010).mnemonic(), "s_getpc_b64");
    let end = 0x1000 + l.bytes.len() as u64;
    assert!(end > 0x1014, "the island is laid out");
    // The function's end (0x1010 originally) is the island's end, not the branch's.
    assert_eq!(l.map_end(0x1010, 0x2000), Some(end));
    assert_eq!(l.new_inst_addr(0x100c), Some(0x100c));
}

/// `mark` inserted with landing rule `landing` in front of the run `range` of `insts`.
fn marked<'a>(
    mark: &'a [Instruction],
    landing: Landing,
    insts: &'a Insts,
    range: Range<usize>,
    relocs: &'a [(u32, Reloc)],
) -> [Piece<'a>; 2] {
    [
        Piece::Insert {
            code: mark,
            landing,
        },
        Piece::Run {
            insts,
            range,
            relocs,
        },
    ]
}

#[test]
fn inserted_blocks_map_instruction_starts_and_keep_offsets_inside_instructions() {
    let t = Target::from_name("gfx1100").unwrap();
    let nop = build::s_nop(t, 0).unwrap();
    let mark = [build::s_ttracedata_imm(t, 1).unwrap()];
    let insts = Insts::from_instructions(0x1000, &[nop; 3]);
    let plan = TextPlan {
        text_addr: 0x1000,
        out_addr: 0x1000,
        kept: Vec::new(),
        pieces: [
            marked(&mark, Landing::Before, &insts, 0..2, &[]),
            marked(&mark, Landing::After, &insts, 2..3, &[]),
        ]
        .concat(),
        pcrels: Vec::new(),
    };
    let l = lay_out(&plan).unwrap();
    assert_eq!(l.bytes.len(), 20);
    assert_eq!(
        at(&l, 0x100c).special(),
        amdgpu_isa::Special::TtraceDataImm(1)
    );
    // Before: block and landing on the marker; After: the block starts at the marker,
    // branches land on the instruction.
    assert_eq!(l.map_branch(0x1000), Some(0x1000));
    assert_eq!(l.new_inst_addr(0x1000), Some(0x1004));
    assert_eq!(l.map_addr(0x1004), Some(0x1008));
    assert_eq!(l.map_inst_start(0x1008), Some(0x100c));
    assert_eq!(l.map_branch(0x1008), Some(0x1010));
    // Inside an instruction: same offset from the instruction itself.
    assert_eq!(l.map_addr(0x1002), Some(0x1006));
    assert_eq!(l.map_inst_start(0x1002), None);
    assert_eq!(l.map_end(0x100c, 0x2000), Some(0x1014));
    assert_eq!(
        l.block_starts().collect::<Vec<_>>(),
        vec![(0x1000, 0x1000), (0x1004, 0x1008), (0x1008, 0x100c)]
    );
}

#[test]
fn retargeting_data_equals_laying_out_again() {
    use amdgpu_isa::build::Operand;
    let t = Target::from_name("gfx1100").unwrap();
    let (p, p1) = (Operand::Sgpr(4), Operand::Sgpr(5));
    // At 0x1000, 0x1004 and 0x100c.
    let insts = Insts::from_instructions(
        0x1000,
        &[
            build::s_getpc_b64(t, 4).unwrap(),
            build::s_add_u32(t, p, p, Operand::Literal(0x7ffc)).unwrap(),
            build::s_addc_u32(t, p1, p1, Operand::Literal(0)).unwrap(),
        ],
    );
    assert_eq!(insts.addr(2), 0x100c);
    let relocs = Relocs::from_set(vec![
        (2, Reloc::PcRelHi { idiom: 0 }),
        (1, Reloc::Branch { target: 0 }),
        (0, Reloc::None),
        (1, Reloc::PcRelLo { idiom: 0 }),
    ]);
    assert_eq!(relocs[0], Reloc::None);
    assert_eq!(relocs[1], Reloc::PcRelLo { idiom: 0 });
    assert_eq!(relocs.within(2, 3), &[(2, Reloc::PcRelHi { idiom: 0 })]);
    let mark = [build::s_ttracedata_imm(t, 1).unwrap()];
    let plan = |target: u64| TextPlan {
        text_addr: 0x1000,
        out_addr: 0x1000,
        kept: Vec::new(),
        pieces: marked(&mark, Landing::Before, &insts, 0..3, relocs.within(0, 3)).to_vec(),
        pcrels: vec![PcRel {
            getpc_addr: 0x1000,
            target,
            use_kind: PcRelUse::Data,
        }],
    };
    let l = lay_out(&plan(0x9000)).unwrap();
    // The getpc moved by 4 bytes: the offset from its end shrinks by 4.
    assert_eq!(at(&l, 0x1008).literal(), Some(0x9000 - 0x1008));
    let moved = plan(0x2_0000_9000);
    let again = lay_out(&moved).unwrap();
    let mut text = l.bytes.clone();
    l.retarget_data(&mut text, &moved.pcrels).unwrap();
    assert_eq!(text, again.bytes);
    assert_ne!(text, l.bytes);
}
