//! Instrumentation regions beyond the simple marker snippets (issue 5): address-trace blocks with
//! a lane loop, SCC save/restore, scope checks and gfx12 clock packing, built with
//! `amdgpu_isa::build` (or assembled by `llvm-mc-22` where no constructor exists), inserted into
//! small kernels assembled and linked by LLVM 22, and verified. Each rule has a mutation the
//! verifier must reject with its pinned message.
mod common;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{decode, Family, Instruction, Target};
use common::*;
use hsaco::CodeObject;
use sqtt_verify::{verify, Check, Finding, Report};

/// Reserved SGPRs of the snippets (the kernels use s0..s3 only).
const S_LANE: u8 = 10;
const S_TMP: u8 = 11;
const S_SCC: u8 = 12;
const S_FLAG: u8 = 13;
const S_CLK: u8 = 14;

/// A kernel with an SCC-live point (between `s_cmp` and `s_cbranch_scc1`), a global store whose
/// address is `v[2:3]`, and M0 never read. `{store}`: the family's store mnemonic; `{extra}`:
/// descriptor directives.
const KERNEL: &str = "
.amdgcn_target \"amdgcn-amd-amdhsa--{mcpu}\"
.text
.globl k
.p2align 8
.type k,@function
k:
  v_mov_b32 v1, 0
  s_cmp_eq_u32 s2, 0
  s_cbranch_scc1 .Lskip
  {store} v[2:3], v1, off
.Lskip:
  s_endpgm
.Lend:
.size k, .Lend-k
.p2align 8
  s_nop 0
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 16
  {extra}
.end_amdhsa_kernel
";

struct Site {
    mcpu: &'static str,
    ws: u32,
    t: Target,
    orig: Vec<u8>,
    /// `s_cbranch_scc1` (SCC live in front of it) and the store.
    branch: u64,
    store: u64,
    entry: u64,
}

fn site(mcpu: &'static str) -> Option<Site> {
    let (store, extra, ws) = match mcpu {
        "gfx942" => ("global_store_dword", ".amdhsa_accum_offset 4", 64),
        _ => ("global_store_b32", ".amdhsa_wavefront_size32 1", 32),
    };
    let src = KERNEL
        .replace("{mcpu}", mcpu)
        .replace("{store}", store)
        .replace("{extra}", extra);
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let orig = assemble(&format!("regions-{mcpu}-{n}"), mcpu, &src)?;
    let co = CodeObject::parse(&orig).expect("parse");
    let k = &co.kernels[0];
    let body = decode_range(&co, k.entry, k.entry + k.code_size.expect("size"));
    let at = |m: &str| {
        body.iter()
            .find(|(_, i)| i.mnemonic() == m)
            .map(|(a, _)| *a)
            .unwrap_or_else(|| panic!("{m} in the test kernel"))
    };
    Some(Site {
        mcpu,
        ws,
        t: isa(&co),
        branch: at("s_cbranch_scc1"),
        store: at(store),
        entry: k.entry,
        orig,
    })
}

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

fn dwords(v: &[Instruction]) -> i16 {
    (v.iter().map(|i| i.len()).sum::<usize>() / 4) as i16
}

/// `s_mov_b32 m0, src; s_nop 0; s_ttracedata`.
fn send(t: Target, src: Operand) -> Vec<Instruction> {
    vec![
        build::s_mov_b32(t, Operand::M0, src).expect("mov m0"),
        build::s_nop(t, 0).expect("nop"),
        build::s_ttracedata(t).expect("ttracedata"),
    ]
}

/// How the lane loop of [`block`] ends.
#[derive(Clone, Copy, PartialEq)]
enum LoopEnd {
    /// Back to the loop head (correct).
    Head,
    /// One dword further back, onto the lane-counter initialisation (never terminates).
    Init,
    /// Far back, out of the inserted run.
    Outside,
}

/// Address-trace block of the spec's framing protocol for a 64-bit address in `v[2:3]`:
/// header (point marker `id`), exec_lo, exec_hi, then lo/hi of every lane.
fn block(t: Target, ws: u32, id: u32, end: LoopEnd, writelane: bool) -> Vec<Instruction> {
    let mut v = send(t, Operand::Literal(id << 2));
    v.extend(send(t, Operand::ExecLo));
    v.extend(send(t, Operand::ExecHi));
    v.push(build::s_mov_b32(t, Operand::Sgpr(S_LANE), Operand::Imm(0)).expect("lane init"));
    let mut body = Vec::new();
    // gfx12: SALU-written SGPRs (the lane counter) need `s_wait_alu depctr_sa_sdst(0)` before a
    // SALU or VALU reads them (hazard rule salu-sgpr-read).
    let sa_sdst = |body: &mut Vec<Instruction>| {
        if t.family() == Family::Gfx12 {
            body.push(build::s_wait_alu(t, 0xfffe).expect("wait_alu"));
        }
    };
    sa_sdst(&mut body);
    for vgpr in [2u16, 3] {
        if t.family() == Family::Gfx9 {
            body.push(build::s_nop(t, 4).expect("nop"));
        }
        let rl = build::v_readlane_b32(t, Operand::Sgpr(S_TMP), vgpr, Operand::Sgpr(S_LANE))
            .expect("v_readlane_b32");
        body.push(if writelane { to_writelane(t, &rl) } else { rl });
        match t.family() {
            Family::Gfx9 => {}
            Family::Gfx10 | Family::Gfx11 => {
                body.push(build::s_waitcnt_depctr(t, 0xf1ff).expect("depctr"))
            }
            Family::Gfx12 | Family::Gfx1250 => {
                body.push(build::s_wait_alu(t, 0xf1ff).expect("wait_alu"))
            }
        }
        body.extend(send(t, Operand::Sgpr(S_TMP)));
    }
    body.push(
        build::s_add_u32(
            t,
            Operand::Sgpr(S_LANE),
            Operand::Sgpr(S_LANE),
            Operand::Imm(1),
        )
        .expect("s_add"),
    );
    sa_sdst(&mut body);
    body.push(
        build::s_cmp(
            t,
            "s_cmp_lg_u32",
            Operand::Sgpr(S_LANE),
            Operand::Imm(ws as i32),
        )
        .expect("s_cmp"),
    );
    let back = -(dwords(&body) + 1)
        - match end {
            LoopEnd::Head => 0,
            LoopEnd::Init => 1,
            LoopEnd::Outside => dwords(&v) + 8,
        };
    body.push(build::s_cbranch_scc1(t, back).expect("s_cbranch_scc1"));
    v.extend(body);
    v
}

/// `v_writelane_b32` from a `v_readlane_b32` of the same operands: the VOP3 opcode is one higher
/// on every family (gfx9 0x289/0x28a, gfx10+ 0x360/0x361); the decoder confirms the result.
fn to_writelane(t: Target, rl: &Instruction) -> Instruction {
    let mut b = rl.bytes().to_vec();
    let w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) + (1 << 16);
    b[..4].copy_from_slice(&w.to_le_bytes());
    let i = decode(&b, t).expect("decodes");
    assert_eq!(i.mnemonic(), "v_writelane_b32");
    i
}

/// The block wrapped in SCC save (`s_cselect_b32 sS, 1, 0`) and restore (`s_cmp_lg_u32 sS, 0`).
fn with_scc_saved(t: Target, inner: Vec<Instruction>) -> Vec<Instruction> {
    let mut v =
        vec![
            build::s_cselect_b32(t, Operand::Sgpr(S_SCC), Operand::Imm(1), Operand::Imm(0))
                .expect("cselect"),
        ];
    v.extend(inner);
    v.push(build::s_cmp(t, "s_cmp_lg_u32", Operand::Sgpr(S_SCC), Operand::Imm(0)).expect("cmp"));
    v
}

fn rows(ws: u32, count: u32) -> String {
    format!("W:{ws}\nP:5:addr_trace_store@k.hip:12\nR:5:extra_payload_count={count}")
}

#[test]
fn address_trace_block_verifies_and_its_mutations_are_rejected() {
    for mcpu in ["gfx1100", "gfx942", "gfx1201"] {
        let Some(s) = site(mcpu) else { return };
        let (t, ws) = (s.t, s.ws);
        let count = 2 + 2 * ws;
        let good = cat(&block(t, ws, 5, LoopEnd::Head, false));
        let new = with_funcmap(&insert_before(&s.orig, s.store, &good), &rows(ws, count));
        let r = run(&s.orig, &new);
        assert!(r.is_clean(), "{mcpu}:\n{}", show(&r));
        assert_eq!(
            r.markers(),
            1,
            "{mcpu}: one header; payload words are not markers"
        );
        assert_eq!(
            r.inserted_sgprs,
            vec![S_LANE as u16, S_TMP as u16],
            "{mcpu}"
        );

        // Payload count one short / one long.
        let short = with_funcmap(
            &insert_before(&s.orig, s.store, &good),
            &rows(ws, count - 1),
        );
        let r = run(&s.orig, &short);
        let want = format!(
            "payload count mismatch: header id 5 declares extra_payload_count={}, word",
            count - 1
        );
        assert!(
            has(&r, Check::Markers, &want),
            "{mcpu}: {want}\n{}",
            show(&r)
        );
        let long = with_funcmap(
            &insert_before(&s.orig, s.store, &good),
            &rows(ws, count + 1),
        );
        let r = run(&s.orig, &long);
        let want = format!(
            "payload count mismatch: header id 5 declares extra_payload_count={}, only {count} word(s) follow",
            count + 1
        );
        assert!(
            has(&r, Check::Markers, &want),
            "{mcpu}: {want}\n{}",
            show(&r)
        );

        // v_writelane writes a VGPR, and not as a save of an SGPR (issue 12 item 3).
        let wl = cat(&block(t, ws, 5, LoopEnd::Head, true));
        let new = with_funcmap(&insert_before(&s.orig, s.store, &wl), &rows(ws, count));
        let r = run(&s.orig, &new);
        assert!(
            has(
                &r,
                Check::Inserted,
                "v_writelane_b32 is not a save of an SGPR into a constant lane"
            ),
            "{mcpu}:\n{}",
            show(&r)
        );

        // The loop branch leaves the run.
        let out = cat(&block(t, ws, 5, LoopEnd::Outside, false));
        let new = with_funcmap(&insert_before(&s.orig, s.store, &out), &rows(ws, count));
        let r = run(&s.orig, &new);
        assert!(
            has(
                &r,
                Check::Inserted,
                "inserted s_cbranch_scc1 leaves its run"
            ),
            "{mcpu}:\n{}",
            show(&r)
        );
        assert!(
            has(&r, Check::Inserted, "inserted run leaves at"),
            "{mcpu}: execution also leaves\n{}",
            show(&r)
        );

        // The loop branch re-initialises the lane counter: never terminates.
        let inf = cat(&block(t, ws, 5, LoopEnd::Init, false));
        let new = with_funcmap(&insert_before(&s.orig, s.store, &inf), &rows(ws, count));
        let r = run(&s.orig, &new);
        assert!(
            has(&r, Check::Inserted, "inserted run does not terminate"),
            "{mcpu}:\n{}",
            show(&r)
        );
    }
}

#[test]
fn live_scc_must_be_saved_and_restored() {
    for mcpu in ["gfx1100", "gfx942"] {
        let Some(s) = site(mcpu) else { return };
        let (t, ws) = (s.t, s.ws);
        let fm = rows(ws, 2 + 2 * ws);
        let bare = cat(&block(t, ws, 5, LoopEnd::Head, false));
        let r = run(
            &s.orig,
            &with_funcmap(&insert_before(&s.orig, s.branch, &bare), &fm),
        );
        assert!(
            has(
                &r,
                Check::Scc,
                "SCC is live here and the inserted run changes it"
            ),
            "{mcpu}:\n{}",
            show(&r)
        );
        let f = r
            .findings
            .iter()
            .find(|f| f.check == Check::Scc)
            .expect("scc");
        assert_eq!(f.original_address, Some(s.branch));

        let saved = cat(&with_scc_saved(t, block(t, ws, 5, LoopEnd::Head, false)));
        let r = run(
            &s.orig,
            &with_funcmap(&insert_before(&s.orig, s.branch, &saved), &fm),
        );
        // In front of the branch the block traces no store of its own straight-line code (a
        // rewrite puts it in front of the store): that is the only finding left.
        let left: Vec<_> = r
            .findings
            .iter()
            .filter(|f| {
                !f.message
                    .contains("\"addr_trace_store\", which does not fit here")
            })
            .collect();
        assert!(
            left.is_empty() && !r.findings.is_empty(),
            "{mcpu}:\n{}",
            show(&r)
        );
    }
}

/// Kernel-entry scope check: flag = HW_ID1 bit 8 (hwreg 23 on gfx10+).
fn scope_entry(t: Target) -> Vec<Instruction> {
    vec![
        build::s_getreg_b32(t, Operand::Sgpr(S_FLAG), 23, 8, 1).expect("getreg"),
        build::s_and_b32(
            t,
            Operand::Sgpr(S_FLAG),
            Operand::Sgpr(S_FLAG),
            Operand::Imm(1),
        )
        .expect("and"),
    ]
}

/// `s_cmp_lg_u32 flag, 0; s_cbranch_scc0 <over>; s_ttracedata_imm (5<<2)`, or with the
/// inverted branch when `inverted`.
fn guarded_marker(t: Target, inverted: bool) -> Vec<Instruction> {
    let br = if inverted {
        build::s_cbranch_scc1(t, 1)
    } else {
        build::s_cbranch_scc0(t, 1)
    };
    vec![
        build::s_cmp(t, "s_cmp_lg_u32", Operand::Sgpr(S_FLAG), Operand::Imm(0)).expect("cmp"),
        br.expect("branch"),
        build::s_ttracedata_imm(t, 5 << 2).expect("marker"),
    ]
}

#[test]
fn scope_guard_must_suppress_markers_when_the_flag_is_0() {
    let Some(s) = site("gfx1100") else { return };
    let t = s.t;
    for inverted in [false, true] {
        // Later insertion first: addresses before it do not move.
        let new = insert_before(&s.orig, s.store, &cat(&guarded_marker(t, inverted)));
        let new = insert_before(&new, s.entry, &cat(&scope_entry(t)));
        let new = with_funcmap(&new, "P:5:vmem_store");
        let r = run(&s.orig, &new);
        if inverted {
            assert!(
                has(
                    &r,
                    Check::Markers,
                    "inserted run emits 1 shaderdata word(s) although the scope flag s13 is 0"
                ),
                "{}",
                show(&r)
            );
        } else {
            assert!(r.is_clean(), "{}", show(&r));
            assert_eq!(r.scope_flag_sgprs, vec![S_FLAG as u16]);
            assert_eq!(r.markers(), 1);
        }
    }
    // Without the kernel-entry computation the guard reads an undefined SGPR: the flag it tests
    // is named, and the kernel that does not compute it.
    let new = with_funcmap(
        &insert_before(&s.orig, s.store, &cat(&guarded_marker(t, false))),
        "P:5:vmem_store",
    );
    let r = run(&s.orig, &new);
    assert!(
        has(
            &r,
            Check::Markers,
            &format!("kernel entry does not compute the scope flag s{S_FLAG} its call graph tests")
        ),
        "{}",
        show(&r)
    );
}

#[test]
fn reading_a_disallowed_hwreg_is_rejected() {
    let Some(s) = site("gfx1100") else { return };
    let t = s.t;
    // hwreg 1 = HW_REG_MODE: not a scope or clock register.
    let bad = build::s_getreg_b32(t, Operand::Sgpr(S_FLAG), 1, 0, 32).expect("getreg");
    let r = run(&s.orig, &insert_before(&s.orig, s.store, bad.bytes()));
    assert!(
        has(
            &r,
            Check::Inserted,
            "s_getreg_b32 of hwreg 1 is not allowed"
        ),
        "{}",
        show(&r)
    );
}

#[test]
fn gfx12_clock_packing_is_decoded_with_the_packed_layout() {
    let Some(s) = site("gfx1201") else { return };
    let snippet = |offset: u32| {
        asm_snippet(
            s.mcpu,
            &format!(
                "s_getreg_b32 s{S_CLK}, hwreg(29, {offset}, 12)\n\
                 s_wait_alu 0xfffe\n\
                 s_lshl_b32 s{S_CLK}, s{S_CLK}, 20\n\
                 s_wait_alu 0xfffe\n\
                 s_or_b32 m0, s{S_CLK}, 0x14\n\
                 s_nop 0\n\
                 s_ttracedata\n"
            ),
        )
    };
    let (Some(good), Some(bad)) = (snippet(4), snippet(0)) else {
        return;
    };
    let m = "M:shader_clock_bits=12;shader_clock_shift=4\nP:5:vmem_store";
    let r = run(
        &s.orig,
        &with_funcmap(&insert_before(&s.orig, s.store, &good), m),
    );
    assert!(r.is_clean(), "{}", show(&r));
    assert_eq!(r.markers(), 1);
    let f = &r.functions[0];
    assert_eq!(f.point_markers, 1, "packed header decodes to point id 5");

    // Without the M: row the clock bits are part of the legacy id, which then varies.
    let r = run(
        &s.orig,
        &with_funcmap(&insert_before(&s.orig, s.store, &good), "P:5:vmem_store"),
    );
    assert!(
        has(
            &r,
            Check::Markers,
            "marker headers depend on register values"
        ),
        "{}",
        show(&r)
    );

    // Clock sampled from the wrong bits.
    let r = run(
        &s.orig,
        &with_funcmap(&insert_before(&s.orig, s.store, &bad), m),
    );
    assert!(
        has(&r, Check::Markers, "is not shader cycles bits [4, 16)"),
        "{}",
        show(&r)
    );

    // Packing and payload rows exclude each other; no _imm form while packing.
    let r = run(
        &s.orig,
        &with_funcmap(
            &insert_before(&s.orig, s.store, &good),
            &format!("{m}\nR:5:extra_payload_count=0\nP:6:x\nR:6:extra_payload_count=1"),
        ),
    );
    assert!(
        has(
            &r,
            Check::Funcmap,
            "M: clock packing together with R: payload rows"
        ),
        "{}",
        show(&r)
    );
    let imm = build::s_ttracedata_imm(s.t, 5 << 2).expect("imm");
    let r = run(
        &s.orig,
        &with_funcmap(&insert_before(&s.orig, s.store, imm.bytes()), m),
    );
    assert!(
        has(
            &r,
            Check::Inserted,
            "s_ttracedata_imm while shader-clock packing is active"
        ),
        "{}",
        show(&r)
    );
}

#[test]
fn address_trace_funcmap_rows_are_consistent() {
    let Some(s) = site("gfx1100") else { return };
    let (t, ws) = (s.t, s.ws);
    let new = insert_before(
        &s.orig,
        s.store,
        &cat(&block(t, ws, 5, LoopEnd::Head, false)),
    );
    let cases = [
        (
            "P:5:addr_trace_store\nR:5:extra_payload_count=66".to_string(),
            "address-trace rows without a W: row",
        ),
        (
            "W:64\nP:5:addr_trace_store\nR:5:extra_payload_count=66".to_string(),
            "W:64 disagrees with a kernel's wave size 32",
        ),
        (
            "W:32\nP:5:addr_trace_stor\nR:5:extra_payload_count=66".to_string(),
            "unknown address-trace name \"addr_trace_stor\"",
        ),
        (
            "W:32\nP:5:addr_trace_store\nR:5:extra_payload_count=66\nR:7:extra_payload_count=1"
                .to_string(),
            "R: row for id 7, which has no F/U/P row",
        ),
    ];
    for (fm, want) in cases {
        let r = run(&s.orig, &with_funcmap(&new, &fm));
        assert!(has(&r, Check::Funcmap, want), "{want}\n{}", show(&r));
    }
}
