//! Mutations of real corpus objects that the verifier must catch, each with its pinned finding,
//! and the allowed edits it must accept. Mutations are made at the byte level with the helpers of
//! `common` (never with the rewriter).
mod common;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{InstClass, MemSpace};
use common::*;
use hsaco::CodeObject;
use sqtt_verify::{verify, Check, Finding, Report};

const GFX942: &str = "gfx942__hip-mini__O3.co";
const GFX1100: &str = "gfx1100__hip-mini__O3.co";
const GFX900: &str = "gfx900__hip-mini__O3.co";
const GFX1201: &str = "gfx1201__hip-mini__O3.co";
const GFX1250: &str = "gfx1250__hip-mini__O3.co";

/// Verifies `new` against `orig`; a changed `new` gets the `.sqtt_patch` run record of a rewrite
/// first ([`with_record`]).
fn run(orig: &[u8], new: &[u8]) -> Report {
    if orig == new {
        return verify(orig, new).expect("verifier runs");
    }
    verify(orig, &with_record(new)).expect("verifier runs")
}

fn has(r: &Report, check: Check, text: &str) -> bool {
    r.findings
        .iter()
        .any(|f| f.check == check && f.message.contains(text))
}

fn show(r: &Report) -> String {
    r.findings
        .iter()
        .map(Finding::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn flipped_bit_in_an_original_instruction_is_caught() {
    for name in [GFX942, GFX1100] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let (addr, inst) = find_inst(&co, |i| i.class() == InstClass::Valu && i.len() == 4)
            .expect("a VOP instruction");
        let mut new = orig.clone();
        new[text_off(&co, addr)] ^= 1; // low bit of src0
        let r = run(&orig, &new);
        let f = r
            .findings
            .iter()
            .find(|f| f.check == Check::Alignment)
            .unwrap_or_else(|| panic!("{name}: not caught:\n{}", show(&r)));
        assert_eq!(f.original_address, Some(addr));
        assert_eq!(f.new_address, Some(addr));
        assert!(
            f.message.starts_with(&format!(
                "original instruction changed: expected {}",
                inst.mnemonic()
            )),
            "{f}"
        );
    }
}

/// Corpus object `name` and a copy with `s_nop 0` inserted at the entry of its first shiftable
/// kernel (byte level, DWARF untouched): (original, copy, entry).
fn nop_at_entry(name: &str) -> (Vec<u8>, Vec<u8>, u64) {
    let orig = load(name);
    let co = CodeObject::parse(&orig).expect("parse");
    let nop = build::s_nop(isa(&co), 0).expect("s_nop");
    let entry = shiftable_entry(&orig, 4);
    let new = insert_before(&orig, entry, nop.bytes());
    (orig, new, entry)
}

#[test]
fn inserted_s_nop_0_is_allowed() {
    for name in [GFX942, GFX1100, GFX900] {
        let (orig, new, _) = nop_at_entry(name);
        let r = run(&orig, &new);
        assert!(r.is_clean(), "{name}:\n{}", show(&r));
        assert_eq!(r.inserted_instructions(), 1);
    }
}

#[test]
fn inserted_memory_instructions_are_rejected() {
    for name in [GFX942, GFX1100] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let is_global_load = |i: &amdgpu_isa::Instruction| i.mnemonic().starts_with("global_load");
        let is_smem =
            |i: &amdgpu_isa::Instruction| i.memory().is_some_and(|m| m.space == MemSpace::Scalar);
        for pred in [
            &is_global_load as &dyn Fn(&amdgpu_isa::Instruction) -> bool,
            &is_smem,
        ] {
            let (_, mem) = find_inst(&co, pred).expect("memory instruction in the object");
            let entry = shiftable_entry(&orig, mem.len() as u64);
            let new = insert_before(&orig, entry, mem.bytes());
            let r = run(&orig, &new);
            let m = mem.mnemonic();
            assert!(
                has(
                    &r,
                    Check::Inserted,
                    &format!("inserted instruction {m} is not allowed")
                ),
                "{name} {m}:\n{}",
                show(&r)
            );
            assert!(
                has(
                    &r,
                    Check::Inserted,
                    &format!("inserted instruction {m} accesses memory")
                ),
                "{name} {m}:\n{}",
                show(&r)
            );
            assert!(
                r.findings.iter().all(|f| f.check == Check::Inserted),
                "only the insertion is wrong:\n{}",
                show(&r)
            );
        }
    }
}

#[test]
fn branch_off_by_one_is_caught() {
    for name in [GFX942, GFX1100, GFX1201] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let (addr, inst) = find_inst(&co, |i| i.mnemonic().starts_with("s_cbranch"))
            .expect("a conditional branch");
        let target = inst.branch_target(addr).expect("target");
        let mut new = orig.clone();
        let off = text_off(&co, addr);
        let simm = u16::from_le_bytes([orig[off], orig[off + 1]]).wrapping_add(1);
        new[off..off + 2].copy_from_slice(&simm.to_le_bytes());
        let r = run(&orig, &new);
        let want = format!(
            "{} to orig {target:#x} reaches {:#x}, allowed {target:#x}",
            inst.mnemonic(),
            target + 4
        );
        assert!(
            has(&r, Check::Branch, &want),
            "{name}: want {want}\n{}",
            show(&r)
        );
    }
}

#[test]
fn shifted_address_builder_literal_is_caught() {
    for name in [GFX942, GFX1201, GFX1250] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let (addr, inst) = find_inst(&co, |i| {
            matches!(i.mnemonic(), "s_add_u32" | "s_add_co_u32" | "s_add_nc_u64")
                && i.literal().is_some()
        })
        .expect("an address builder add");
        let mut new = orig.clone();
        let lit = inst
            .with_literal(inst.literal().expect("literal").wrapping_add(4))
            .expect("re-encode");
        let off = text_off(&co, addr);
        new[off..off + lit.len()].copy_from_slice(lit.bytes());
        let r = run(&orig, &new);
        assert!(
            has(&r, Check::Branch, "address builder to orig"),
            "{name}:\n{}",
            show(&r)
        );
    }
}

#[test]
fn marker_without_funcmap_row_is_caught_and_with_row_accepted() {
    let orig = load(GFX1100);
    let co = CodeObject::parse(&orig).expect("parse");
    let t = isa(&co);
    let marker = build::s_ttracedata_imm(t, 5 << 2).expect("s_ttracedata_imm");
    // In front of an s_barrier: where a `barrier` row's point may stand.
    let new = insert_before(&orig, barrier_site(&orig, 4), marker.bytes());
    let r = run(&orig, &new);
    assert!(
        has(
            &r,
            Check::Markers,
            "marker value 0x14 (id 5) has no .sqtt_funcmap row"
        ),
        "{}",
        show(&r)
    );

    let with_row = with_funcmap(&new, "P:5:barrier");
    let r = run(&orig, &with_row);
    assert!(r.is_clean(), "{}", show(&r));
    assert_eq!(r.markers(), 1);

    let wrong_row = with_funcmap(&new, "P:6:barrier");
    let r = run(&orig, &wrong_row);
    assert!(
        has(&r, Check::Markers, "(id 5) has no .sqtt_funcmap row"),
        "{}",
        show(&r)
    );

    // A point word naming a scope row (fresh tester, session 10: was accepted).
    for kind in ['U', 'F'] {
        let scope_row = with_funcmap(&new, &format!("{kind}:5:some_scope"));
        let r = run(&orig, &scope_row);
        let want = format!("point marker value 0x14 (id 5) names a {kind}: row, not a P: row");
        assert!(has(&r, Check::Markers, &want), "{want}\n{}", show(&r));
    }
}

#[test]
fn m0_marker_sequence_needs_the_wait_state_and_a_row() {
    let orig = load(GFX900);
    let co = CodeObject::parse(&orig).expect("parse");
    let t = isa(&co);
    let set = build::s_mov_b32(t, Operand::M0, Operand::Literal(0x114)).expect("s_mov_b32");
    let nop = build::s_nop(t, 0).expect("s_nop");
    let td = build::s_ttracedata(t).expect("s_ttracedata");
    let entry = barrier_site(&orig, 16);
    let good = with_funcmap(
        &insert_before(&orig, entry, &cat(&[set, nop, td])),
        "P:69:barrier",
    );
    let r = run(&orig, &good);
    assert!(r.is_clean(), "{}", show(&r));
    assert_eq!(r.markers(), 1);
    let bad = with_funcmap(
        &insert_before(&orig, entry, &cat(&[set, td])),
        "P:69:barrier",
    );
    let r = run(&orig, &bad);
    assert!(
        has(
            &r,
            Check::M0,
            "s_ttracedata directly after an M0 write (needs s_nop 0)"
        ),
        "{}",
        show(&r)
    );
}

/// A gfx1100 kernel in which M0 holds the constant 5 at both `s_sendmsg` (which read M0), with a
/// branch to the second one's block.
const M0_KERNEL: &str = "
.amdgcn_target \"amdgcn-amd-amdhsa--gfx1100\"
.text
.globl m0_kernel
.p2align 8
.type m0_kernel,@function
m0_kernel:
  s_mov_b32 m0, 5
  s_cmp_eq_u32 s0, 0
  s_cbranch_scc1 .Lskip
  s_nop 0
  s_sendmsg sendmsg(MSG_INTERRUPT)
.Lskip:
  s_nop 0
  s_sendmsg sendmsg(MSG_INTERRUPT)
  s_barrier
  s_endpgm
.Lend:
.size m0_kernel, .Lend-m0_kernel
.p2align 8
  s_nop 0
.rodata
.p2align 6
.amdhsa_kernel m0_kernel
  .amdhsa_next_free_vgpr 1
  .amdhsa_next_free_sgpr 8
.end_amdhsa_kernel
";

#[test]
fn clobbering_live_m0_is_caught_and_restoring_it_accepted() {
    let Some(orig) = assemble("m0", "gfx1100", M0_KERNEL) else {
        return;
    };
    let co = CodeObject::parse(&orig).expect("parse");
    let t = isa(&co);
    let sends: Vec<u64> = find_all(&co, "s_sendmsg");
    let skip = find_all(&co, "s_nop")[1]; // .Lskip: the second s_nop 0 of the body
    let reader = sends[1];
    let set = build::s_mov_b32(t, Operand::M0, Operand::Literal(0x114)).expect("set");
    let nop = build::s_nop(t, 0).expect("nop");
    let td = build::s_ttracedata(t).expect("td");
    // The marker stands in front of the s_sendmsg before the s_barrier: a `barrier` point.
    let fm = "P:69:barrier";
    let r = run(
        &orig,
        &with_funcmap(&insert_before(&orig, reader, &cat(&[set, nop, td])), fm),
    );
    assert!(
        has(
            &r,
            Check::M0,
            "M0 is live here and the inserted run leaves it Const(276)"
        ),
        "{}",
        show(&r)
    );

    let remat = build::s_mov_b32(t, Operand::M0, Operand::Imm(5)).expect("remat");
    let r = run(
        &orig,
        &with_funcmap(
            &insert_before(&orig, reader, &cat(&[set, nop, td, remat, nop])),
            fm,
        ),
    );
    assert!(
        r.is_clean(),
        "re-materialising the reaching constant 5 is allowed:\n{}",
        show(&r)
    );

    let wrong = build::s_mov_b32(t, Operand::M0, Operand::Imm(6)).expect("wrong remat");
    let r = run(
        &orig,
        &with_funcmap(
            &insert_before(&orig, reader, &cat(&[set, nop, td, wrong, nop])),
            fm,
        ),
    );
    assert!(
        has(
            &r,
            Check::M0,
            "M0 is live here and the inserted run leaves it Const(6)"
        ),
        "{}",
        show(&r)
    );

    let save = build::s_mov_b32(t, Operand::Sgpr(101), Operand::M0).expect("save");
    let restore = build::s_mov_b32(t, Operand::M0, Operand::Sgpr(101)).expect("restore");
    let r = run(
        &orig,
        &with_funcmap(
            &insert_before(&orig, reader, &cat(&[save, set, nop, td, restore])),
            fm,
        ),
    );
    assert!(
        has(
            &r,
            Check::M0,
            "M0 written directly before s_sendmsg, which reads it (needs s_nop 0)"
        ),
        "{}",
        show(&r)
    );

    let saved = with_funcmap(
        &insert_before(&orig, skip, &cat(&[save, set, nop, td, restore])),
        fm,
    );
    let r = run(&orig, &saved);
    assert!(r.is_clean(), "{}", show(&r));
    assert_eq!(r.inserted_sgprs, vec![101]);
    assert_eq!(r.inserted_instructions(), 5);

    // The branch to .Lskip now lands after the save: the restore reads a stale s101.
    let nco = CodeObject::parse(&saved).expect("parse");
    let (baddr, br) = find_inst(&nco, |i| i.mnemonic() == "s_cbranch_scc1").expect("branch");
    let tgt = br.branch_target(baddr).expect("target");
    let moved = br.with_branch_target(baddr, tgt + 4).expect("re-encode");
    let mut bad = saved.clone();
    let off = text_off(&nco, baddr);
    bad[off..off + 4].copy_from_slice(moved.bytes());
    let r = run(&orig, &bad);
    assert!(
        has(
            &r,
            Check::M0,
            "M0 restored from s101, which this run did not save"
        ),
        "{}",
        show(&r)
    );
}

/// The first `s_barrier` of a kernel with `room` bytes to shift (where a point marker naming a
/// `barrier` row may be inserted).
fn barrier_site(bytes: &[u8], room: u64) -> u64 {
    let co = CodeObject::parse(bytes).expect("parse");
    shiftable_kernels(&co, room)
        .iter()
        .flat_map(|(_, s, e)| decode_range(&co, *s, *e))
        .find(|(_, i)| i.mnemonic() == "s_barrier")
        .expect("an s_barrier in a shiftable kernel")
        .0
}

fn find_all(co: &CodeObject, mnemonic: &str) -> Vec<u64> {
    let k = &co.kernels[0];
    decode_range(co, k.entry, k.entry + k.code_size.expect("size"))
        .into_iter()
        .filter(|(_, i)| i.mnemonic() == mnemonic)
        .map(|(a, _)| a)
        .collect()
}

#[test]
fn descriptor_entry_offset_off_by_256_is_caught() {
    for name in [GFX942, GFX1100] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let k = &co.kernels[0];
        let mut new = orig.clone();
        let off = k.kd_offset as usize + 0x10;
        let v = k.descriptor.kernel_code_entry_byte_offset + 256;
        new[off..off + 8].copy_from_slice(&v.to_le_bytes());
        let r = run(&orig, &new);
        let want = format!(
            "kernel_code_entry_byte_offset points at {:#x}, the kernel starts at {:#x}",
            k.entry + 256,
            k.entry
        );
        assert!(
            has(&r, Check::Descriptor, &want),
            "{name}: want {want}\n{}",
            show(&r)
        );
    }
}

/// A gfx1100 device function with padding behind it and `s_setpc_b64` returns: (bytes, name,
/// entry, return addresses). Objects without DWARF only: the byte-level insertions here do not
/// move `.debug_line` (see `line_table_not_following_inserted_code_is_caught`).
fn function_site() -> (Vec<u8>, String, u64, Vec<u64>) {
    // The file name, not the path: a checkout directory such as `wt-gaps` contains "-g".
    for p in corpus_files().into_iter().filter(|p| {
        let n = p.file_name().unwrap_or_default().to_string_lossy();
        n.contains("gfx11") && !n.contains("-g")
    }) {
        let bytes = std::fs::read(&p).expect("read");
        let Ok(co) = CodeObject::parse(&bytes) else {
            continue;
        };
        for (name, s, e) in shiftable_functions(&co, 16) {
            let rets: Vec<u64> = decode_range(&co, s, e)
                .into_iter()
                .filter(|(_, i)| i.mnemonic() == "s_setpc_b64")
                .map(|(a, _)| a)
                .collect();
            if !rets.is_empty() {
                return (bytes, name, s, rets);
            }
        }
    }
    panic!("no shiftable gfx11 device function in the corpus");
}

#[test]
fn function_enter_exit_markers_must_balance() {
    let (orig, name, entry, rets) = function_site();
    let co = CodeObject::parse(&orig).expect("parse");
    let t = isa(&co);
    let enter = build::s_ttracedata_imm(t, (1 << 2) | 2).expect("enter");
    let exit = build::s_ttracedata_imm(t, 1).expect("exit");
    let row = format!("F:1:{name}");
    // Insert the exits first (highest address first), then the enter at the entry.
    let mut exits_only = orig.clone();
    for r in rets.iter().rev() {
        exits_only = insert_before(&exits_only, *r, exit.bytes());
    }
    let good = with_funcmap(&insert_before(&exits_only, entry, enter.bytes()), &row);
    let r = run(&orig, &good);
    assert!(r.is_clean(), "{name}:\n{}", show(&r));
    let f = r
        .functions
        .iter()
        .find(|f| f.name == name)
        .expect("function report");
    assert_eq!((f.enter_markers, f.exit_markers), (1, rets.len()));

    let no_exit = with_funcmap(&insert_before(&orig, entry, enter.bytes()), &row);
    let r = run(&orig, &no_exit);
    assert!(
        has(
            &r,
            Check::Markers,
            "1 marker scope(s) still open at s_setpc_b64"
        ),
        "{}",
        show(&r)
    );

    let no_enter = with_funcmap(&exits_only, &row);
    let r = run(&orig, &no_enter);
    assert!(
        has(
            &r,
            Check::Markers,
            "F row id 1: the entry has no enter marker 0x6"
        ),
        "{}",
        show(&r)
    );
    assert!(
        has(
            &r,
            Check::Markers,
            "exit marker with no open scope on some path"
        ),
        "{}",
        show(&r)
    );

    // The same words with id 1 a point row: the decoder never pushes a P id, so every exit
    // underflows.
    let point = with_funcmap(&good, "P:1:barrier");
    let r = run(&orig, &point);
    for text in [
        "enter marker 0x6: id 1 is a P: row, which never opens a scope",
        "exit marker with no open scope on some path",
    ] {
        assert!(has(&r, Check::Markers, text), "{text}:\n{}", show(&r));
    }

    let unknown = with_funcmap(&good, "F:1:no_such_function");
    let r = run(&orig, &unknown);
    assert!(
        has(
            &r,
            Check::Funcmap,
            "F row \"no_such_function\" names no device function"
        ),
        "{}",
        show(&r)
    );
}

#[test]
fn insertion_into_a_kernarg_preload_prologue_is_caught() {
    let mut tried = 0;
    for name in [
        "gfx942__hip-mini__O3-kernarg-preload.co",
        "gfx950__hip-mini__O3-kernarg-preload.co",
        "gfx90a__hip-mini__O3-kernarg-preload.co",
    ] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let preload: Vec<u64> = co
            .kernels
            .iter()
            .filter(|k| k.descriptor.kernarg_preload_length() > 0)
            .map(|k| k.entry)
            .collect();
        let all = co
            .kernels
            .iter()
            .filter_map(|k| Some((k.name.clone(), k.entry, k.code_size?)));
        let Some(entry) = preload
            .into_iter()
            .find(|e| all.clone().any(|(_, s, _)| s == *e) && can_shift(&co, *e))
        else {
            continue;
        };
        tried += 1;
        let nop = build::s_nop(isa(&co), 0).expect("s_nop");
        let r = run(&orig, &insert_before(&orig, entry, nop.bytes()));
        assert!(
            has(
                &r,
                Check::Descriptor,
                "kernarg-preload kernel: instruction at +0x0 of the first 256 bytes moved to +0x4"
            ),
            "{name}:\n{}",
            show(&r)
        );
    }
    assert!(
        tried > 0,
        "no shiftable kernarg-preload kernel in the corpus"
    );
}

/// Whether the kernel at `entry` qualifies for [`insert_before`] (ignoring kernarg preload).
fn can_shift(co: &CodeObject, entry: u64) -> bool {
    let Some(k) = co.kernels.iter().find(|k| k.entry == entry) else {
        return false;
    };
    let Some(size) = k.code_size else {
        return false;
    };
    let Some(text) = co.text() else { return false };
    let next = co
        .kernels
        .iter()
        .map(|k| k.entry)
        .chain(co.functions.iter().map(|f| f.address))
        .filter(|&s| s > entry)
        .min()
        .unwrap_or(text.addr + text.size);
    let body = decode_range(co, entry, entry + size);
    next >= entry + size + 4
        && decode_range(co, entry + size, entry + size + 4)
            .iter()
            .all(|(_, i)| i.mnemonic() == "s_nop")
        && body.iter().all(|(a, i)| {
            i.mnemonic() != "s_getpc_b64"
                && i.branch_target(*a)
                    .is_none_or(|t| t >= entry && t < entry + size)
        })
}

/// Code inserted without moving `.debug_line` puts original instructions on other source lines:
/// caught as [`Check::Dwarf`] (a real `-g` object; the verifier reads the line table with gimli).
#[test]
fn line_table_not_following_inserted_code_is_caught() {
    let name = "gfx1100__hip-mini__O3-g.co";
    let (orig, new, entry) = nop_at_entry(name);
    let r = run(&orig, &new);
    let f = r
        .findings
        .iter()
        .find(|f| f.check == Check::Dwarf)
        .unwrap_or_else(|| panic!("{name}: not caught:\n{}", show(&r)));
    assert!(
        f.message
            .contains("original instruction(s) moved to another source position in .debug_line"),
        "{f}"
    );
    assert!(f.original_address.is_some_and(|a| a >= entry), "{f}");
    assert!(
        run(&orig, &orig).findings.is_empty(),
        "identity must verify"
    );
}

/// Inserted code may change an SGPR only where the original program no longer needs it (issue
/// 12): in front of a kernel's first SMEM load, the load's destination (written, not read) is
/// dead and may be clobbered, while its address SGPRs are live and may not.
#[test]
fn clobbering_a_live_sgpr_is_caught_and_a_dead_one_accepted() {
    for name in [GFX942, GFX1100, GFX1201] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let t = isa(&co);
        let site = shiftable_kernels(&co, 8)
            .into_iter()
            .find_map(|(_, entry, end)| {
                let (at, first) = *decode_range(&co, entry, end).first()?;
                if first.format() != amdgpu_isa::Format::Smem {
                    return None;
                }
                let (r, w) = (first.reads(), first.writes());
                let live = (0..106u16).find(|&s| r.contains_sgpr(s))?;
                let dead = (0..106u16).find(|&s| w.contains_sgpr(s) && !r.contains_sgpr(s))?;
                Some((at, live, dead))
            });
        let Some((at, live, dead)) = site else {
            panic!("{name}: no kernel starts with an SMEM load");
        };
        let clobber = |s: u16| {
            build::s_mov_b32(t, Operand::Sgpr(s as u8), Operand::Imm(0))
                .expect("s_mov_b32")
                .bytes()
                .to_vec()
        };
        let r = run(&orig, &insert_before(&orig, at, &clobber(dead)));
        assert!(r.is_clean(), "{name}: dead s{dead}:\n{}", show(&r));
        assert_eq!(r.inserted_sgprs, vec![dead], "{name}");
        let r = run(&orig, &insert_before(&orig, at, &clobber(live)));
        assert!(
            has(
                &r,
                Check::Inserted,
                &format!(
                    "inserted run changes s{live}, which is live or awaiting an SMEM result there"
                )
            ),
            "{name}: live s{live}:\n{}",
            show(&r)
        );
    }
}

/// The copy of `orig` with the first msgpack value of metadata key `key` changed in place
/// (a positive fixint, `uint 8` or `uint 16`; the encoding keeps its size): (copy, old value,
/// new value).
fn metadata_value_changed(orig: &[u8], key: &str) -> (Vec<u8>, u64, u64) {
    let mut enc = vec![0xa0 | key.len() as u8];
    enc.extend_from_slice(key.as_bytes());
    let at = orig
        .windows(enc.len())
        .position(|w| w == enc)
        .unwrap_or_else(|| panic!("{key} not in the metadata note"))
        + enc.len();
    let mut new = orig.to_vec();
    let (old, changed) = match orig[at] {
        v @ 0..=0x7f => {
            new[at] = v ^ 0x20;
            (u64::from(v), u64::from(v ^ 0x20))
        }
        0xcc => {
            new[at + 1] ^= 0x20;
            (u64::from(orig[at + 1]), u64::from(new[at + 1]))
        }
        0xcd => {
            new[at + 2] ^= 0x20;
            let v = |b: &[u8]| u64::from(u16::from_be_bytes([b[at + 1], b[at + 2]]));
            (v(orig), v(&new))
        }
        b => panic!("{key}: value encoding {b:#x} not handled by this test"),
    };
    (new, old, changed)
}

#[test]
fn changed_kernel_metadata_keys_are_caught() {
    for name in [GFX942, GFX1100] {
        let orig = load(name);
        for key in [".kernarg_segment_size", ".wavefront_size"] {
            let (new, a, b) = metadata_value_changed(&orig, key);
            let r = run(&orig, &new);
            let want = format!("{key} changed from {a} to {b}");
            assert!(
                has(&r, Check::Metadata, &want),
                "{name}: want {want}\n{}",
                show(&r)
            );
        }
        // A field deep inside `.args` is named by its path, not by the whole array.
        let (new, a, b) = metadata_value_changed(&orig, ".offset");
        let r = run(&orig, &new);
        let want = format!(".args[0].offset changed from {a} to {b}");
        let f = r
            .findings
            .iter()
            .find(|f| f.check == Check::Metadata)
            .unwrap_or_else(|| panic!("{name}: .offset change not caught"));
        assert_eq!(f.message, want, "{name}");
        assert!(run(&orig, &orig).is_clean(), "{name}: identity is clean");
    }
}

#[test]
fn changed_metadata_target_is_caught() {
    let orig = load(GFX942);
    let co = CodeObject::parse(&orig).expect("parse");
    let target = co.metadata[0].target().expect("amdhsa.target").to_string();
    // Same length, another processor: `gfx942` -> `gfx940`.
    let changed = target.replacen("gfx942", "gfx940", 1);
    assert_ne!(target, changed);
    let at = orig
        .windows(target.len())
        .position(|w| w == target.as_bytes())
        .expect("target string in the note");
    let mut new = orig.clone();
    new[at..at + changed.len()].copy_from_slice(changed.as_bytes());
    let r = run(&orig, &new);
    let want = format!("amdhsa.target changed from \"{target}\" to \"{changed}\"");
    assert!(has(&r, Check::Metadata, &want), "want {want}\n{}", show(&r));
}

/// A register-count key renamed into a second copy of the other (`.vgpr_count` ->
/// `.sgpr_count`, same length) leaves `.vgpr_count` missing and `.sgpr_count` twice: both are
/// caught although the counts' values have rules of their own (fresh tester, session 10).
#[test]
fn a_register_count_key_turned_into_a_duplicate_is_caught() {
    let orig = load(GFX942);
    let at = orig
        .windows(11)
        .position(|w| w == b".vgpr_count")
        .expect(".vgpr_count in the note");
    let mut new = orig.clone();
    new[at + 1] = b's';
    let r = run(&orig, &new);
    assert!(has(&r, Check::Metadata, ".vgpr_count ("), "{}", show(&r));
    assert!(has(&r, Check::Metadata, ") removed"), "{}", show(&r));
    assert!(
        has(&r, Check::Metadata, ".sgpr_count appears 2 times (was 1)"),
        "{}",
        show(&r)
    );
}

/// Index and copy of the program header of the `PT_LOAD` that maps `.text`.
fn text_segment(co: &CodeObject) -> (usize, hsaco::elf::Segment) {
    let t = co.text().expect(".text");
    co.elf
        .segments
        .iter()
        .enumerate()
        .find(|(_, p)| {
            p.p_type == hsaco::elf::PT_LOAD
                && t.addr >= p.vaddr
                && t.addr + t.size <= p.vaddr + p.memsz
        })
        .map(|(i, p)| (i, p.clone()))
        .expect("a PT_LOAD maps .text")
}

/// `orig` with the 8-byte program header field at `field` (byte offset inside the 56-byte
/// ELF64 program header) of program header `index` set to `value`.
fn phdr_field_set(orig: &[u8], index: usize, field: usize, value: u64) -> Vec<u8> {
    let co = CodeObject::parse(orig).expect("parse");
    let at = co.elf.header.e_phoff as usize + 56 * index + field;
    let mut new = orig.to_vec();
    new[at..at + 8].copy_from_slice(&value.to_le_bytes());
    new
}

/// The loader maps program headers, not sections: an executable segment shrunk below the end of
/// `.text` or a segment that lost its execute permission changes what runs although every
/// section is intact (fresh tester, session 10: was accepted).
#[test]
fn program_headers_that_load_text_differently_are_caught() {
    for name in [GFX942, GFX1201] {
        let orig = load(name);
        let co = CodeObject::parse(&orig).expect("parse");
        let (i, p) = text_segment(&co);
        // p_filesz at +32, p_memsz at +40: both shrunk by 0x100 bytes.
        let shrunk = phdr_field_set(&orig, i, 32, p.filesz - 0x100);
        let shrunk = phdr_field_set(&shrunk, i, 40, p.memsz - 0x100);
        let r = run(&orig, &shrunk);
        assert!(
            has(
                &r,
                Check::Segments,
                "maps sections [], the original's maps [.text"
            ),
            "{name}: shrunk PT_LOAD\n{}",
            show(&r)
        );
        // Only p_filesz shrunk: .text is still in the memory image but zero-filled at its end.
        let unbacked = phdr_field_set(&orig, i, 32, p.filesz - 0x100);
        let r = run(&orig, &unbacked);
        assert!(
            has(
                &r,
                Check::Segments,
                "no longer loads the file bytes of section .text"
            ),
            "{name}: p_filesz shrunk\n{}",
            show(&r)
        );
        // p_paddr (+24) moved away from p_vaddr.
        let moved = phdr_field_set(&orig, i, 24, p.paddr + 0x1000);
        let r = run(&orig, &moved);
        assert!(
            has(&r, Check::Segments, "no longer lies where p_vaddr"),
            "{name}: p_paddr moved\n{}",
            show(&r)
        );
        // p_flags (u32 at +4) without PF_X.
        let mut no_exec = orig.clone();
        let at = co.elf.header.e_phoff as usize + 56 * i + 4;
        no_exec[at..at + 4].copy_from_slice(&(p.p_flags & !1).to_le_bytes());
        let r = run(&orig, &no_exec);
        let want = format!(
            "p_type/p_flags/p_align changed from {:#x}/{:#x}/{:#x} to {:#x}/{:#x}/{:#x}",
            p.p_type,
            p.p_flags,
            p.align,
            p.p_type,
            p.p_flags & !1,
            p.align
        );
        assert!(
            has(&r, Check::Segments, &want),
            "{name}: want {want}\n{}",
            show(&r)
        );
        assert!(run(&orig, &orig).is_clean(), "{name}: identity is clean");
    }
}

/// File offset of the section header of the first section named `name`.
fn section_header(bytes: &[u8], name: &str) -> usize {
    let co = CodeObject::parse(bytes).expect("parse");
    let s = co.section(name).expect("section");
    let h = &co.elf.header;
    (h.e_shoff + s.index as u64 * u64::from(h.e_shentsize)) as usize
}

/// The `.sqtt_patch` run record (fresh tester, session 12: any change to it was accepted): a
/// rewrite has exactly one, non-allocated, holding the rewriter's JSON line.
#[test]
fn the_run_record_must_be_one_non_alloc_json_line() {
    let (orig, new, _) = nop_at_entry(GFX1100);
    let want_one = "the rewritten object has 0 .sqtt_patch sections; a rewrite has exactly one";
    let r = verify(&orig, &new).expect("verifier runs");
    assert!(has(&r, Check::Sections, want_one), "{}", show(&r));
    let good = with_record(&new);
    assert!(run(&orig, &good).is_clean());

    // SHF_ALLOC set in the section header (sh_flags at +8): a section the loader would map
    // without a segment; the reader refuses the object before any check.
    let mut alloc = good.clone();
    let at = section_header(&alloc, ".sqtt_patch") + 8;
    alloc[at..at + 8].copy_from_slice(&hsaco::elf::SHF_ALLOC.to_le_bytes());
    assert!(verify(&orig, &alloc).is_err());
    // Another section type (sh_type at +4): SHT_NOBITS, no contents in the file; SHF_WRITE
    // (sh_flags at +8; fresh tester, session 13): the rewrite writes no flag at all.
    for (field, value, shown) in [
        (
            4,
            u64::from(hsaco::elf::SHT_NOBITS),
            "type 0x8 and flags 0x0",
        ),
        (8, hsaco::elf::SHF_WRITE, "type 0x1 and flags 0x1"),
    ] {
        let mut bad = good.clone();
        let at = section_header(&bad, ".sqtt_patch") + field;
        let width = if field == 4 { 4 } else { 8 };
        bad[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        let want = format!(
            ".sqtt_patch has {shown}; a rewrite writes a non-allocated SHT_PROGBITS section without flags"
        );
        let r = run(&orig, &bad);
        assert!(has(&r, Check::Sections, &want), "{}", show(&r));
    }

    // A second section named .sqtt_patch: the funcmap's sh_name pointed at the record's name.
    let both = with_funcmap(&good, "W:32");
    let co = CodeObject::parse(&both).expect("parse");
    let name = co.section(".sqtt_patch").expect("record").sh_name;
    let mut twice = both.clone();
    let at = section_header(&twice, ".sqtt_funcmap");
    twice[at..at + 4].copy_from_slice(&name.to_le_bytes());
    let r = run(&orig, &twice);
    assert!(
        has(
            &r,
            Check::Sections,
            "the rewritten object has 2 .sqtt_patch sections"
        ),
        "{}",
        show(&r)
    );

    // Other contents: not JSON, another tool, a key missing or added, a second line.
    let bad = "is not the run record a rewrite writes";
    for text in [
        "sqtt-patch 0.1.0\n",
        r#"{"options":"x","tool":"other","version":"0.1.0"}"#,
        r#"{"options":"x","tool":"sqtt-patch","version":"0.1.0"}"#,
        "{\"options\":\"x\",\"tool\":\"sqtt-patch\",\"version\":\"0.1.0\"}\n\n",
        "{\"tool\":\"sqtt-patch\",\"version\":\"0.1.0\"}\n",
        "{\"options\":\"x\",\"tool\":\"sqtt-patch\",\"version\":1}\n",
        "{\"extra\":0,\"options\":\"x\",\"tool\":\"sqtt-patch\",\"version\":\"0.1.0\"}\n",
    ] {
        let co = CodeObject::parse(&good).expect("parse");
        let mut ed = hsaco::CodeObjectEditor::new(&co);
        ed.add_or_replace_section(".sqtt_patch", 1, 0, 1, text.as_bytes().to_vec())
            .expect("replace");
        let r = run(&orig, &ed.write().expect("write"));
        assert!(has(&r, Check::Sections, bad), "{text:?}:\n{}", show(&r));
    }
}
