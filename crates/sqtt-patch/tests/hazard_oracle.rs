//! LLVM 22 as the hazard oracle (issue 13, "Hazards"): every inserted run of an output, with up
//! to [`CONTEXT`] original instructions on each side, is lifted to MIR and run through
//! `llc-22 -run-pass=post-RA-hazard-rec` (plus `amdgpu-wait-sgpr-hazards` on gfx12). The same
//! context without the run is run too. LLVM must not want more waits (added `S_NOP` wait states,
//! `S_WAITCNT_DEPCTR`, `V_NOP`, `S_WAITCNT_VSCNT`, or a changed existing wait) with our run than
//! without it.
//!
//! Lifting (`lift`): the instructions snippets contain are lifted exactly (`s_nop`,
//! `s_ttracedata[_imm]`, `s_mov_b32`, `s_add_u32`, `s_addc_u32`, shifts, `s_or_b32`,
//! `s_cmp_lg_u32`, `s_bitcmp1_b32`, `s_cselect_b32`, `s_getreg_b32`, `s_wait_alu` /
//! `s_waitcnt_depctr`, `s_waitcnt_vscnt`, `s_cbranch_scc0/1`, `v_readlane_b32`). Original
//! neighbours are lifted to a stand-in of the same LLVM class with the same first written and
//! read registers (SALU → `S_MOV_B32/B64` or `S_ADD_U32`; VALU → `V_MOV_B32`, `V_EXP_F32` for
//! transcendentals, `V_READFIRSTLANE_B32` for SGPR results, `V_CMP` for VCC; VMEM →
//! `GLOBAL_LOAD/STORE_DWORD[_SADDR]`; DS → `DS_READ_B32_gfx9`; SMEM → `S_LOAD_DWORD_IMM`;
//! other SOPP → `S_NOP 0`, one wait state like the original). Conservative cut: the context stops
//! at the first original instruction that cannot be lifted faithfully (branches, calls, MFMA,
//! EXEC/M0 writers other than SALU moves, memory reading M0), so LLVM sees less context than the
//! hardware; this can hide a hazard whose producer lies beyond the cut, never invent one.
//!
//! `SQTT_HAZARD_ORACLE=all` runs every fixture; the default (CI) runs the first object per
//! processor for every feature set.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use amdgpu_isa::{Family, Flow, InstClass, Instruction, RegSet, Special, SpecialReg, Target};
use sqtt_verify::LaidOut;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const LLC: &str = "/usr/lib/llvm-22/bin/llc";
/// Original instructions kept on each side of an inserted run (each is >= 1 wait state; LLVM's
/// longest window is 19).
const CONTEXT: usize = 20;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Feature sets of the brief.
fn feature_sets(t: Target) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut v = vec![
        (
            "all",
            vec![
                "--functions",
                "1",
                "--barriers",
                "1",
                "--kernel-scopes",
                "--trace-addresses",
                "memory,lds",
                "--scope",
            ],
        ),
        ("memory", vec!["--memory", "2:5"]),
    ];
    if matches!(t.family(), Family::Gfx12 | Family::Gfx1250) {
        v.push((
            "clock",
            vec![
                "--shader-clock-bits",
                "12",
                "--functions",
                "1",
                "--barriers",
                "1",
                "--kernel-scopes",
            ],
        ));
    }
    v
}

fn sreg(n: u16, count: u16) -> String {
    if count == 2 {
        format!("$sgpr{}_sgpr{}", n, n + 1)
    } else {
        format!("$sgpr{n}")
    }
}

/// First SGPR-like register of a set as MIR (`$sgprN`, `$m0`, `$vcc_lo`, `$exec_lo`), with a
/// 64-bit pair when the set holds N and N+1.
fn scalar(set: &RegSet) -> Option<String> {
    if let Some(n) = (0..106u16).find(|n| set.contains_sgpr(*n)) {
        let pair = n % 2 == 0 && set.contains_sgpr(n + 1);
        return Some(sreg(n, if pair { 2 } else { 1 }));
    }
    if set.contains(SpecialReg::M0) {
        return Some("$m0".into());
    }
    if set.contains(SpecialReg::VccLo) {
        return Some(
            if set.contains(SpecialReg::VccHi) {
                "$vcc"
            } else {
                "$vcc_lo"
            }
            .into(),
        );
    }
    None
}

fn vgpr(set: &RegSet) -> Option<u16> {
    (0..512u16).find(|v| set.contains_vgpr(*v))
}

/// A scalar source: register of `field` (`ssrc0`/`ssrc1`) or an immediate.
fn ssrc(i: &Instruction, field: &str) -> String {
    match i.field(field) {
        Some(v @ 0..=105) => format!("$sgpr{v}"),
        Some(106) => "$vcc_lo".into(),
        Some(107) => "$vcc_hi".into(),
        Some(124) => "$m0".into(),
        Some(126) => "$exec_lo".into(),
        Some(127) => "$exec_hi".into(),
        Some(v @ 128..=192) => (v - 128).to_string(),
        Some(v @ 193..=208) => (-((v - 192) as i32)).to_string(),
        Some(255) => (i.literal().unwrap_or(0) as u32 as i32).to_string(),
        _ => "0".into(),
    }
}

fn sdst(i: &Instruction) -> Option<String> {
    let w = i.writes();
    let mut only = w;
    only = only.intersection(&{
        let mut s = RegSet::new();
        for n in 0..106 {
            s.add_sgpr(n);
        }
        s.add(SpecialReg::M0);
        s
    });
    scalar(&only)
}

/// The MIR text of one instruction, or `None` when it cannot be lifted faithfully.
/// `target_bb` gives the block of a branch target.
fn lift(i: &Instruction, branch_bb: Option<usize>) -> Option<String> {
    let wave32 = i.target().family() != Family::Gfx9;
    let m = i.mnemonic();
    let simm = || i.field("simm16").unwrap_or(0);
    // SOPK immediates are signed in MIR.
    let simm_k = || i.field("simm16").unwrap_or(0) as u16 as i16;
    let (r, w) = (i.reads(), i.writes());
    if w.contains(SpecialReg::ExecLo) {
        return None;
    }
    Some(match (i.class(), m) {
        (_, "s_nop") => format!("S_NOP {}", simm()),
        (_, "s_ttracedata") => "S_TTRACEDATA implicit $m0".into(),
        (_, "s_ttracedata_imm") => format!("S_TTRACEDATA_IMM {}", simm()),
        (_, "s_wait_alu" | "s_waitcnt_depctr") => format!("S_WAITCNT_DEPCTR {}", simm()),
        (_, "s_waitcnt_vscnt") => format!("S_WAITCNT_VSCNT undef $sgpr_null, {}", simm()),
        (_, "s_cbranch_scc0" | "s_cbranch_scc1") => {
            format!("{} %bb.{}, implicit $scc", m.to_uppercase(), branch_bb?)
        }
        // Other branches (windows of the negative tests only; the context stops at branches):
        // a branch is a branch to the hazard passes.
        (InstClass::Branch, _) if i.branch_target(0).is_some() => {
            format!("S_CBRANCH_SCC1 %bb.{}, implicit $scc", branch_bb?)
        }
        // Negative tests only (see `each_hazard_class_is_rejected_by_verify_and_llvm_agrees`).
        (_, "s_movrels_b32") => format!(
            "{} = S_MOVRELS_B32 {}, implicit $m0",
            sdst(i)?,
            ssrc(i, "ssrc0")
        ),
        (_, "s_setpc_b64") => {
            let s = (0..106u16).find(|n| r.contains_sgpr(*n))?;
            format!("S_SETPC_B64 {}", sreg(s, 2))
        }
        // The 4x4x1 f32 MFMA with a VGPR result (gfx90a name; gfx940 line: `_16b_` spelling).
        (_, "v_mfma_f32_4x4x1f32" | "v_mfma_f32_4x4x1_16b_f32") => {
            let d = vgpr(&w)?;
            if (0..256u16).any(|a| w.contains_agpr(a)) {
                return None;
            }
            let src = |f: &str| match i.field(f) {
                Some(v @ 256..=511) => Some(format!("$vgpr{}", v - 256)),
                _ => None,
            };
            let quad = format!(
                "${}",
                (d..d + 4)
                    .map(|v| format!("vgpr{v}"))
                    .collect::<Vec<_>>()
                    .join("_")
            );
            format!(
                "{quad} = V_MFMA_F32_4X4X1F32_vgprcd_e64 {}, {}, {quad}, 0, 0, 0, implicit $mode, implicit $exec",
                src("src0")?,
                src("src1")?
            )
        }
        (_, "s_getreg_b32") => {
            format!("{} = S_GETREG_B32 {}, implicit $mode", sdst(i)?, simm_k())
        }
        (_, "s_setreg_b32") => format!(
            "S_SETREG_B32 {}, {}, implicit-def $mode, implicit $mode",
            ssrc(i, "sdst"),
            simm_k()
        ),
        (_, "s_cmp_lg_u32" | "s_bitcmp1_b32") => format!(
            "{} {}, {}, implicit-def $scc",
            m.to_uppercase(),
            ssrc(i, "ssrc0"),
            ssrc(i, "ssrc1")
        ),
        (_, "s_cselect_b32") => format!(
            "{} = S_CSELECT_B32 {}, {}, implicit $scc",
            sdst(i)?,
            ssrc(i, "ssrc0"),
            ssrc(i, "ssrc1")
        ),
        (_, "s_mov_b32") => format!("{} = S_MOV_B32 {}", sdst(i)?, ssrc(i, "ssrc0")),
        (
            _,
            "s_add_u32" | "s_addc_u32" | "s_lshl_b32" | "s_lshr_b32" | "s_or_b32" | "s_add_co_u32"
            | "s_add_co_ci_u32",
        ) => {
            let op = match m {
                "s_add_co_u32" => "S_ADD_U32",
                "s_add_co_ci_u32" => "S_ADDC_U32",
                _ => return lift_salu_named(i, &m.to_uppercase()),
            };
            lift_salu_named(i, op)?
        }
        (_, "v_readlane_b32") => format!(
            "{} = V_READLANE_B32 $vgpr{}, {}",
            sdst(i)?,
            vgpr(&r)?,
            ssrc(i, "src1")
        ),
        (InstClass::Salu, _) => {
            if matches!(i.special(), Special::None) {
                let d = sdst(i);
                let src = scalar(&r).unwrap_or_else(|| "0".into());
                match d {
                    Some(d) if d.contains('_') && !d.starts_with("$vcc") => {
                        let s = if src.contains('_') { src } else { "0".into() };
                        format!("{d} = S_MOV_B64 {s}")
                    }
                    Some(d) if d.starts_with("$vcc") => return None,
                    Some(d) => {
                        let s = if src.contains('_') { "0".into() } else { src };
                        format!("{d} = S_MOV_B32 {s}")
                    }
                    None => "S_NOP 0".into(),
                }
            } else if i.special() == Special::Sendmsg {
                format!("S_SENDMSG {}, implicit $exec, implicit $m0", simm())
            } else {
                // s_waitcnt*, s_wait_*cnt, s_barrier, s_setprio, ...: one wait state.
                "S_NOP 0".into()
            }
        }
        (InstClass::Valu, _) => {
            if m.starts_with("v_mfma")
                || m.starts_with("v_smfmac")
                || m.starts_with("v_writelane")
                || m.starts_with("v_readlane")
            {
                return None;
            }
            let src = vgpr(&r).map_or("0".to_string(), |v| format!("$vgpr{v}"));
            if let Some(s) = sdst(i) {
                if s.starts_with("$vcc") || s == "$m0" {
                    return None;
                }
                let s = s.split('_').next().unwrap_or(&s).to_string();
                let v = vgpr(&r)?;
                format!("{s} = V_READFIRSTLANE_B32 $vgpr{v}, implicit $exec")
            } else if w.contains(SpecialReg::VccLo) {
                let v = vgpr(&r)?;
                // Wave64 VCC on gfx10+ needs a wave64 subtarget: cut there.
                let d = match (w.contains(SpecialReg::VccHi), wave32) {
                    (true, false) => "$vcc",
                    (false, true) => "$vcc_lo",
                    _ => return None,
                };
                format!("{d} = V_CMP_EQ_U32_e64 $vgpr{v}, $vgpr{v}, implicit $exec")
            } else if let Some(d) = vgpr(&w) {
                if i.llvm_tsflags() & (1 << 16) != 0 {
                    format!("$vgpr{d} = V_EXP_F32_e32 {src}, implicit $mode, implicit $exec")
                } else {
                    format!("$vgpr{d} = V_MOV_B32_e32 {src}, implicit $exec")
                }
            } else {
                return None;
            }
        }
        (
            InstClass::Global
            | InstClass::Flat
            | InstClass::Scratch
            | InstClass::Buffer
            | InstClass::Image,
            _,
        ) => {
            if r.contains(SpecialReg::M0) {
                return None;
            }
            // Even-aligned address pair (gfx90a and gfx1250 require it).
            let a = vgpr(&r).unwrap_or(0) & !1;
            let saddr = (0..106u16).find(|n| r.contains_sgpr(*n)).map(|n| n & !1);
            match (vgpr(&w), saddr) {
                (Some(d), Some(s)) => format!(
                    "$vgpr{d} = GLOBAL_LOAD_DWORD_SADDR {}, $vgpr{a}, 0, 0, implicit $exec",
                    sreg(s, 2)
                ),
                (Some(d), None) => format!(
                    "$vgpr{d} = GLOBAL_LOAD_DWORD $vgpr{a}_vgpr{}, 0, 0, implicit $exec",
                    a + 1
                ),
                (None, Some(s)) => format!(
                    "GLOBAL_STORE_DWORD_SADDR $vgpr{a}, $vgpr{a}, {}, 0, 0, implicit $exec",
                    sreg(s, 2)
                ),
                (None, None) => format!(
                    "GLOBAL_STORE_DWORD $vgpr{a}_vgpr{}, $vgpr{a}, 0, 0, implicit $exec",
                    a + 1
                ),
            }
        }
        (InstClass::Ds, _) => {
            if r.contains(SpecialReg::M0) {
                return None;
            }
            let a = vgpr(&r).unwrap_or(0);
            match vgpr(&w) {
                Some(d) => format!("$vgpr{d} = DS_READ_B32_gfx9 $vgpr{a}, 0, 0, implicit $exec"),
                None => format!("DS_WRITE_B32_gfx9 $vgpr{a}, $vgpr{a}, 0, 0, implicit $exec"),
            }
        }
        (InstClass::Smem, _) => {
            let d = sdst(i).unwrap_or_else(|| "$sgpr0".into());
            let d = d.split('_').next().unwrap_or(&d).to_string();
            let b = (0..106u16)
                .find(|n| r.contains_sgpr(*n))
                .map_or(0, |n| n & !1);
            format!("{d} = S_LOAD_DWORD_IMM {}, 0, 0", sreg(b, 2))
        }
        _ => return None,
    })
}

fn lift_salu_named(i: &Instruction, op: &str) -> Option<String> {
    let carry = if op == "S_ADDC_U32" {
        ", implicit $scc"
    } else {
        ""
    };
    Some(format!(
        "{} = {op} {}, {}, implicit-def $scc{carry}",
        sdst(i)?,
        ssrc(i, "ssrc0"),
        ssrc(i, "ssrc1")
    ))
}

/// One MIR function body for `items` (branches inside `items` become blocks; a branch leaving
/// them goes to the final block).
fn body(items: &[LaidOut], _t: Target) -> Option<String> {
    let addr_idx: BTreeMap<u64, usize> =
        items.iter().enumerate().map(|(k, x)| (x.addr, k)).collect();
    let mut starts = std::collections::BTreeSet::new();
    starts.insert(0usize);
    for (k, x) in items.iter().enumerate() {
        if let Some(tg) = x.inst.branch_target(x.addr) {
            starts.insert(k + 1);
            starts.insert(*addr_idx.get(&tg).unwrap_or(&items.len()));
        }
        // A terminator (`S_SETPC_B64`) must end its block.
        if x.inst.flow() == Flow::IndirectJump {
            starts.insert(k + 1);
        }
    }
    starts.insert(items.len());
    let bb_of = |k: usize| starts.iter().position(|s| *s == k);
    let mut out = String::new();
    for (k, x) in items.iter().enumerate() {
        if starts.contains(&k) {
            writeln!(out, "  bb.{}:", bb_of(k)?).ok()?;
        }
        let bb = x
            .inst
            .branch_target(x.addr)
            .and_then(|tg| bb_of(*addr_idx.get(&tg).unwrap_or(&items.len())));
        writeln!(out, "    {}", lift(&x.inst, bb)?).ok()?;
    }
    writeln!(out, "  bb.{}:\n    S_ENDPGM 0", bb_of(items.len())?).ok()?;
    Some(out)
}

/// Context on one side: originals that lift, stopping at the first one that does not.
fn context<'a>(it: impl Iterator<Item = &'a LaidOut>) -> Vec<LaidOut> {
    let mut v = Vec::new();
    for x in it {
        if x.inserted || v.len() == CONTEXT || x.inst.flow() != Flow::Fallthrough {
            break;
        }
        if lift(&x.inst, None).is_none() {
            break;
        }
        v.push(*x);
    }
    v
}

/// Waits LLVM added: output lines that are waits and not in the input (as a multiset).
fn added_waits(input: &str, output: &str) -> Vec<String> {
    let mut have: BTreeMap<&str, usize> = BTreeMap::new();
    for l in input.lines() {
        *have.entry(l.trim()).or_default() += 1;
    }
    let mut added = Vec::new();
    for l in output.lines().map(str::trim) {
        let is_wait = l.starts_with("S_NOP")
            || l.starts_with("S_WAITCNT_DEPCTR")
            || l.starts_with("V_NOP")
            || l.starts_with("S_WAITCNT_VSCNT");
        match have.get_mut(l) {
            Some(n) if *n > 0 => *n -= 1,
            _ if is_wait => added.push(l.to_string()),
            _ => {}
        }
    }
    added
}

/// Wait weight of added waits: S_NOP n counts n+1 wait states, others 1.
fn weight(w: &[String]) -> usize {
    w.iter()
        .map(|l| {
            l.strip_prefix("S_NOP ")
                .and_then(|n| n.parse::<usize>().ok())
                .map_or(1, |n| n + 1)
        })
        .sum()
}

/// Runs llc on functions `f<k>`; returns each function's body text after the passes.
fn run_llc(t: Target, bodies: &[String]) -> Vec<String> {
    let mut mir = String::new();
    for (k, b) in bodies.iter().enumerate() {
        write!(
            mir,
            "---\nname: f{k}\ntracksRegLiveness: false\nmachineFunctionInfo:\n  isEntryFunction: true\nbody: |\n{b}...\n"
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("in.mir");
    std::fs::write(&p, &mir).unwrap();
    if let Ok(d) = std::env::var("SQTT_HAZARD_ORACLE_DUMP") {
        std::fs::write(d, &mir).unwrap();
    }
    let passes = if t.family() == Family::Gfx12 {
        "post-RA-hazard-rec,amdgpu-wait-sgpr-hazards"
    } else {
        "post-RA-hazard-rec"
    };
    let o = Command::new(LLC)
        .args(["-mtriple=amdgcn-amd-amdhsa", &format!("-mcpu={}", t.name())])
        .arg(format!("-run-pass={passes}"))
        .args(["-o", "-"])
        .arg(&p)
        .output()
        .expect("run llc-22");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "llc-22 failed for {}: {}\n{mir}",
        t.name(),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut out = vec![String::new(); bodies.len()];
    let mut cur: Option<usize> = None;
    for l in text.lines() {
        if let Some(n) = l.strip_prefix("name:") {
            cur = n.trim().strip_prefix('f').and_then(|k| k.parse().ok());
        } else if let Some(k) = cur {
            out[k].push_str(l);
            out[k].push('\n');
        }
    }
    out
}

/// Result of checking one output.
#[derive(Default)]
struct Tally {
    regions: usize,
    skipped: usize,
    worse: Vec<String>,
}

/// Checks every inserted run of `rewritten` against LLVM; `label` names the output.
fn check_output(original: &[u8], rewritten: &[u8], label: &str, tally: &mut Tally) {
    let co = hsaco::CodeObject::parse(original).unwrap();
    let t = Target::from_elf_mach(co.elf.header.e_flags & 0xff).unwrap();
    let funcs = sqtt_verify::layout(original, rewritten).unwrap();
    let mut bodies = Vec::new();
    let mut names = Vec::new();
    for (fname, seq) in &funcs {
        let mut k = 0;
        while k < seq.len() {
            if !seq[k].inserted {
                k += 1;
                continue;
            }
            let e = (k..seq.len())
                .find(|&j| !seq[j].inserted)
                .unwrap_or(seq.len());
            let mut before = context(seq[..k].iter().rev());
            before.reverse();
            let after = context(seq[e..].iter());
            let with: Vec<LaidOut> = before
                .iter()
                .chain(&seq[k..e])
                .chain(&after)
                .copied()
                .collect();
            let without: Vec<LaidOut> = before.iter().chain(&after).copied().collect();
            match (body(&with, t), body(&without, t)) {
                (Some(a), Some(b)) => {
                    bodies.push(a);
                    bodies.push(b);
                    names.push(format!("{label} {fname} run at {:#x}", seq[k].addr));
                }
                _ => tally.skipped += 1,
            }
            k = e;
        }
    }
    if bodies.is_empty() {
        return;
    }
    let outs = run_llc(t, &bodies);
    for (r, name) in names.iter().enumerate() {
        tally.regions += 1;
        let wa = added_waits(&bodies[2 * r], &outs[2 * r]);
        let wb = added_waits(&bodies[2 * r + 1], &outs[2 * r + 1]);
        if weight(&wa) > weight(&wb) || (wa.len() > wb.len()) {
            tally.worse.push(format!(
                "{name}: LLVM adds {wa:?} with the run, {wb:?} without\n{}",
                bodies[2 * r]
            ));
        }
    }
}

fn instrument(input: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.co");
    let st = Command::new(BIN)
        .env_clear()
        .arg(input)
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .expect("run sqtt-patch");
    st.status.success().then(|| std::fs::read(&out).unwrap())
}

#[test]
fn llvm_wants_no_extra_wait_around_inserted_code() {
    let all = std::env::var("SQTT_HAZARD_ORACLE").is_ok_and(|v| v == "all");
    let mut files: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures/objects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "co"))
        .collect();
    files.sort();
    let mut seen = std::collections::BTreeSet::new();
    let mut tally = Tally::default();
    let mut outputs = 0;
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let proc_ = name.split("__").next().unwrap_or("").to_string();
        if !all && !seen.insert(proc_.clone()) {
            continue;
        }
        let original = std::fs::read(f).unwrap();
        let t = Target::from_name(&proc_).expect("fixture processor");
        for (set, args) in feature_sets(t) {
            let Some(out) = instrument(f, &args) else {
                continue;
            };
            outputs += 1;
            check_output(&original, &out, &format!("{name} [{set}]"), &mut tally);
        }
    }
    eprintln!(
        "hazard oracle: {outputs} outputs, {} inserted runs checked with LLVM, {} not liftable, {} where LLVM wants more waits",
        tally.regions,
        tally.skipped,
        tally.worse.len()
    );
    assert!(
        tally.regions > 100,
        "too few regions checked: {}",
        tally.regions
    );
    assert!(
        tally.worse.is_empty(),
        "LLVM wants more waits around inserted code:\n{}",
        tally
            .worse
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A same-length rewrite of inserted instructions of a real output that creates one hazard
/// class: `(inserted instructions in address order, index) -> Some(new bytes at that index)`.
type Mutation = fn(&[LaidOut], usize) -> Option<Vec<(usize, Vec<u8>)>>;

fn is(x: &LaidOut, m: &str) -> bool {
    x.inserted && x.inst.mnemonic() == m
}

fn vop1(op: u32, vdst: u16, vsrc: u16) -> Vec<u8> {
    (0x7e00_0000 | (u32::from(vdst) << 17) | (op << 9) | (0x100 + u32::from(vsrc)))
        .to_le_bytes()
        .to_vec()
}

/// `s_mov_b32 m0, K; s_nop 0; s_ttracedata` -> `s_nop 0; s_mov_b32 m0, K; s_ttracedata`.
fn swap_nop_and_m0_write(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b, c) = (s.get(k)?, s.get(k + 1)?, s.get(k + 2)?);
    let m0 = a.inst.writes().contains(SpecialReg::M0) && a.inst.len() == 4;
    (is(a, "s_mov_b32") && m0 && is(b, "s_nop") && is(c, "s_ttracedata")).then(|| {
        vec![
            (k, b.inst.bytes().to_vec()),
            (k + 1, a.inst.bytes().to_vec()),
        ]
    })
}

/// `v_readlane sX, vA, sC; v_readlane sY, vA+1, sC` -> second one selects lane sX.
fn lane_select_from_readlane(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let a = s.get(k)?;
    if !is(a, "v_readlane_b32") {
        return None;
    }
    let x = a.inst.field("vdst")?;
    // The block's next `v_readlane_b32` (the high half of a 64-bit address, a few instructions
    // on): it reads `x` as its lane select. SALU reads of SGPRs in between (which commit VALU
    // SGPR writes on gfx12) become `s_nop 0`s of the same length.
    let j = (k + 1..(k + 6).min(s.len())).find(|&j| is(&s[j], "v_readlane_b32"))?;
    let mut edits = Vec::new();
    for (i, n) in s.iter().enumerate().take(j).skip(k + 1) {
        let salu_reads_sgpr = n.inst.class() == InstClass::Salu
            && (0..106u16).any(|r| n.inst.reads().contains_sgpr(r));
        if salu_reads_sgpr {
            let nops = 0xbf80_0000u32.to_le_bytes().repeat(n.inst.len() / 4);
            edits.push((i, nops));
        }
    }
    let b = &s[j];
    let mut w = b.inst.bytes().to_vec();
    // VOP3 src1 is bits 17:9 of the second dword.
    let mut d1 = u32::from_le_bytes(w[4..8].try_into().ok()?);
    d1 = (d1 & !(0x1ff << 9)) | (x << 9);
    w[4..8].copy_from_slice(&d1.to_le_bytes());
    edits.push((j, w));
    Some(edits)
}

/// gfx12: the `s_wait_alu` committing the lane counter before the loop -> `s_nop 0`.
fn drop_wait_alu(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b) = (s.get(k)?, s.get(k + 1)?);
    (is(a, "s_wait_alu") && is(b, "v_readlane_b32"))
        .then(|| vec![(k, 0xbf80_0000u32.to_le_bytes().to_vec())])
}

/// The loop counter init before the loop -> a VALU write (`op`, VOP1) of the VGPR the loop reads.
fn valu_before_readlane(op: u32) -> Mutation {
    match op {
        0x25 => |s, k| valu_write_read(s, k, 0x25),
        0x20 => |s, k| valu_write_read(s, k, 0x20),
        _ => |s, k| valu_write_read(s, k, 0x01),
    }
}

fn valu_write_read(s: &[LaidOut], k: usize, op: u32) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b) = (s.get(k)?, s.get(k + 1)?);
    if !(is(a, "s_mov_b32") && a.inst.len() == 4 && is(b, "v_readlane_b32")) {
        return None;
    }
    let v = (0..256u16).find(|v| b.inst.reads().contains_vgpr(*v))?;
    Some(vec![(k, vop1(op, v, v))])
}

/// gfx1010: a snippet's closing `s_waitcnt_vscnt null, 0` (and the scope guard's right after
/// it) -> `s_nop 0`.
fn drop_vscnt(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    if !is(&s[k], "s_waitcnt_vscnt") || (k > 0 && is(&s[k - 1], "s_waitcnt_vscnt")) {
        return None;
    }
    let nop = 0xbf80_0000u32.to_le_bytes().to_vec();
    Some(
        (k..s.len())
            .take_while(|&j| is(&s[j], "s_waitcnt_vscnt"))
            .map(|j| (j, nop.clone()))
            .collect(),
    )
}

/// gfx9 scope check: the `s_cselect_b32` before the next field's `s_getreg_b32` -> an
/// `s_setreg_b32` of the register that getreg reads.
fn setreg_before_getreg(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b) = (s.get(k)?, s.get(k + 1)?);
    if !(is(a, "s_cselect_b32") && is(b, "s_getreg_b32")) {
        return None;
    }
    let w = 0xb900_0000 | (b.inst.field("sdst")? << 16) | b.inst.field("simm16")?;
    Some(vec![(k, w.to_le_bytes().to_vec())])
}

/// gfx9: `s_mov_b32 m0, K; s_nop 0; s_ttracedata` -> the `s_nop 0` becomes `s_movrels_b32 s0, s0`
/// (reads M0 right after its SALU write).
fn movrel_after_m0_write(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b, c) = (s.get(k)?, s.get(k + 1)?, s.get(k + 2)?);
    let m0 = a.inst.writes().contains(SpecialReg::M0) && a.inst.len() == 4;
    // SOP1 `s_movrels_b32 s0, s0` (gfx9 opcode 0x2a; `llvm-mc-22 -mcpu=gfx900 -show-encoding`).
    (is(a, "s_mov_b32") && m0 && is(b, "s_nop") && is(c, "s_ttracedata"))
        .then(|| vec![(k + 1, 0xbe80_2a00u32.to_le_bytes().to_vec())])
}

/// The lowest SGPR an original VMEM access reads.
fn vmem_sgpr(x: &LaidOut) -> Option<u16> {
    let vmem = matches!(
        x.inst.class(),
        InstClass::Global | InstClass::Flat | InstClass::Buffer | InstClass::Scratch
    );
    (vmem && !x.inserted)
        .then(|| (0..106u16).find(|n| x.inst.reads().contains_sgpr(*n)))
        .flatten()
}

/// gfx9: the loop's closing `s_cmp_lg_u32` before `s_cbranch_scc1` and an original VMEM access
/// that reads SGPR sN -> `v_readfirstlane_b32 sN, v0` (VALU write of the SGPR one wait state
/// before the access).
fn valu_sgpr_before_vmem(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b, c) = (s.get(k)?, s.get(k + 1)?, s.get(k + 2)?);
    if !(is(a, "s_cmp_lg_u32") && is(b, "s_cbranch_scc1")) {
        return None;
    }
    let n = vmem_sgpr(c)?;
    // VOP1 `v_readfirstlane_b32` (opcode 2): vdst is an SGPR number.
    Some(vec![(k, vop1(0x02, n, 0))])
}

/// gfx10.1: an original VMEM access reading SGPR sN, then the inserted `s_mov_b32 m0, K` ->
/// `s_mov_b32 sN, K` (SALU write of an SGPR the access still reads).
fn salu_write_after_vmem(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b) = (s.get(k.checked_sub(1)?)?, s.get(k)?);
    if !(is(b, "s_mov_b32") && b.inst.len() == 4 && b.inst.writes().contains(SpecialReg::M0)) {
        return None;
    }
    let n = vmem_sgpr(a)?;
    let w = u32::from_le_bytes(b.inst.bytes()[..4].try_into().ok()?);
    // SOP1 sdst is bits 22:16.
    let w = (w & !(0x7f << 16)) | (u32::from(n) << 16);
    Some(vec![(k, w.to_le_bytes().to_vec())])
}

/// MFMA machines: `v_readlane sX, vA, sC; v_readlane sY, vB, sC` -> the first one becomes
/// `v_mfma_f32_4x4x1f32 v[D:D+3], v0, v1, v[D:D+3]` with D = B rounded down to even (the
/// second reads an MFMA result at once). Encoding as `llvm-mc-22 -mcpu=gfx90a -show-encoding`:
/// VOP3P opcode 0x42, src2 = vdst.
fn mfma_before_readlane(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    if !is(s.get(k)?, "v_readlane_b32") {
        return None;
    }
    // The block's next `v_readlane_b32`, a few instructions on.
    let j = (k + 1..(k + 6).min(s.len())).find(|&j| is(&s[j], "v_readlane_b32"))?;
    let b = &s[j];
    let v = (0..256u32).find(|v| b.inst.reads().contains_vgpr(*v as u16))?;
    let d = v & !1;
    let d0 = 0xd3c2_0000u32 | d;
    let d1 = 0x100 | (0x101 << 9) | ((0x100 + d) << 18);
    let mut w = d0.to_le_bytes().to_vec();
    w.extend(d1.to_le_bytes());
    Some(vec![(k, w)])
}

/// gfx12: `v_readlane sX, vA, sC; v_readlane sY, vB, sC` -> `v_cmp_eq_u32_e64 vcc_lo, vA, vA;
/// v_readlane sY, vB, vcc_lo` (VALU write of VCC, then a VALU reading it as lane select).
fn vcc_write_then_read(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let mut edits = lane_select_from_readlane(s, k)?;
    let a = &s[k];
    let v = (0..256u32).find(|v| a.inst.reads().contains_vgpr(*v as u16))?;
    // VOP3 `v_cmp_eq_u32_e64` (opcode 0x4a) with vdst vcc_lo (106); `llvm-mc-22 -mcpu=gfx1200`.
    let mut w = 0xd44a_006au32.to_le_bytes().to_vec();
    w.extend(((0x100 + v) | ((0x100 + v) << 9)).to_le_bytes());
    let sel = &mut edits.last_mut()?.1;
    let mut d1 = u32::from_le_bytes(sel[4..8].try_into().ok()?);
    d1 = (d1 & !(0x1ff << 9)) | (106 << 9);
    sel[4..8].copy_from_slice(&d1.to_le_bytes());
    edits.push((k, w));
    Some(edits)
}

/// gfx12: the loop-entry `s_wait_alu` after the lane counter's SALU write -> `s_setpc_b64 s[0:1]`
/// (an indirect jump with an SGPR write still pending).
fn setpc_after_salu_write(s: &[LaidOut], k: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let (a, b) = (s.get(k)?, s.get(k + 1)?);
    // SOP1 `s_setpc_b64 s[0:1]` (gfx12 opcode 0x48; `llvm-mc-22 -mcpu=gfx1200`).
    (is(a, "s_wait_alu") && is(b, "v_readlane_b32"))
        .then(|| vec![(k, 0xbe80_4800u32.to_le_bytes().to_vec())])
}

/// Every site of `m` in `out`: the mutated object and the address window `[from, to)` of a few
/// instructions around the edit (for the LLVM check).
fn mutate(original: &[u8], out: &[u8], m: Mutation) -> Vec<(Vec<u8>, u64, u64)> {
    let co = hsaco::CodeObject::parse(out).unwrap();
    let text = co.text().unwrap();
    let mut v = Vec::new();
    for (_, seq) in sqtt_verify::layout(original, out).unwrap() {
        for k in 0..seq.len() {
            if let Some(edits) = m(&seq, k) {
                let mut b = out.to_vec();
                for (j, bytes) in edits {
                    let off = (text.offset + (seq[j].addr - text.addr)) as usize;
                    b[off..off + bytes.len()].copy_from_slice(&bytes);
                }
                // Back far enough for the gfx10.1 LDS -> branch -> VMEM rule.
                let from = seq[k.saturating_sub(24)].addr;
                let last = &seq[(k + 4).min(seq.len() - 1)];
                v.push((b, from, last.addr + last.inst.len() as u64));
            }
        }
    }
    v
}

/// Wait weight LLVM adds to the straight-line instructions of `bytes` in `[from, to)` (all
/// lifted; inner branches are not expected in these windows).
fn llvm_waits(bytes: &[u8], from: u64, to: u64) -> usize {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let t = Target::from_elf_mach(co.elf.header.e_flags & 0xff).unwrap();
    let text = co.text().unwrap();
    let code = &bytes
        [(text.offset + (from - text.addr)) as usize..(text.offset + (to - text.addr)) as usize];
    let mut items = Vec::new();
    let mut off = 0;
    while off < code.len() {
        let inst = amdgpu_isa::decode(&code[off..], t).unwrap();
        items.push(LaidOut {
            addr: from + off as u64,
            inst,
            inserted: true,
            original_address: None,
        });
        off += inst.len();
    }
    // Start after the last instruction that does not lift (e.g. an EXEC write).
    let start = items
        .iter()
        .rposition(|x| lift(&x.inst, Some(0)).is_none())
        .map_or(0, |p| p + 1);
    let b = body(&items[start..], t).expect("window lifts");
    let out = run_llc(t, std::slice::from_ref(&b));
    weight(&added_waits(&b, &out[0]))
}

#[test]
fn each_hazard_class_is_rejected_by_verify_and_llvm_agrees() {
    let cases: [(&str, &[&str], &str, Mutation); 17] = [
        (
            "gfx900__memory__O3.co",
            &["--trace-addresses", "memory"],
            "m0-msg",
            swap_nop_and_m0_write,
        ),
        (
            "gfx900__memory__O3.co",
            &["--trace-addresses", "memory"],
            "valu-sgpr-lanesel",
            lane_select_from_readlane,
        ),
        (
            "gfx1200__memory__O3.co",
            &["--trace-addresses", "memory"],
            "salu-sgpr-read",
            drop_wait_alu,
        ),
        (
            "gfx1200__memory__O3.co",
            &["--trace-addresses", "memory"],
            "valu-sgpr-read",
            lane_select_from_readlane,
        ),
        (
            "gfx1100__memory__O3.co",
            &["--trace-addresses", "memory"],
            "trans-use",
            valu_before_readlane(0x25),
        ),
        (
            "gfx942__memory__O3.co",
            &["--trace-addresses", "memory"],
            "valu-vgpr-rwlane",
            valu_before_readlane(0x01),
        ),
        (
            "gfx1010__memory__O3.co,gfx1010__ocl__O3.co,gfx1010__barriers__O3.co,gfx1010__memory__O0.co,gfx1010__ocl__O0.co",
            &["--trace-addresses", "memory,lds", "--scope"],
            "lds-branch-vmem",
            drop_vscnt,
        ),
        (
            "gfx900__memory__O3.co",
            &["--scope", "--kernel-scopes", "--scope-wave", "1"],
            "setreg",
            setreg_before_getreg,
        ),
        (
            "gfx900__memory__O3.co",
            &["--trace-addresses", "memory"],
            "m0-movrel",
            movrel_after_m0_write,
        ),
        (
            "gfx900__memory__O3.co",
            &["--trace-addresses", "memory"],
            "valu-sgpr-vmem",
            valu_sgpr_before_vmem,
        ),
        (
            "gfx90a__memory__O3.co",
            &["--trace-addresses", "memory"],
            "mfma-result",
            mfma_before_readlane,
        ),
        (
            "gfx942__memory__O3.co",
            &["--trace-addresses", "memory"],
            "mfma-result",
            mfma_before_readlane,
        ),
        (
            "gfx942__memory__O3.co",
            &["--trace-addresses", "memory"],
            "trans-use",
            valu_before_readlane(0x20),
        ),
        (
            "gfx1250__memory__O3.co",
            &["--trace-addresses", "memory"],
            "trans-use",
            valu_before_readlane(0x25),
        ),
        (
            "gfx1010__memory__O3.co",
            &["--trace-addresses", "memory"],
            "vmem-sgpr-salu-write",
            salu_write_after_vmem,
        ),
        (
            "gfx1200__memory__O3.co",
            &["--trace-addresses", "memory"],
            "valu-vcc-read",
            vcc_write_then_read,
        ),
        (
            "gfx1200__memory__O3.co",
            &["--trace-addresses", "memory"],
            "setpc-pending",
            setpc_after_salu_write,
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (fixtures, args, rule, m) in cases {
        let found = fixtures
            .split(',')
            .any(|f| rejected_and_llvm_agrees(f, args, rule, m, dir.path()));
        assert!(
            found,
            "{fixtures}: no mutation site produced a {rule} finding"
        );
    }
}

/// Whether some site of `m` in the output of `fixture` is reported as `rule` by
/// `sqtt-patch verify` (which must then fail); LLVM must add waits there.
fn rejected_and_llvm_agrees(
    fixture: &str,
    args: &[&str],
    rule: &str,
    m: Mutation,
    dir: &Path,
) -> bool {
    let path = workspace().join("fixtures/objects").join(fixture);
    let original = std::fs::read(&path).unwrap();
    let out = instrument(&path, args).unwrap_or_else(|| panic!("{fixture}: instrument"));
    for (n, (bad, from, to)) in mutate(&original, &out, m).into_iter().enumerate() {
        let p = dir.join(format!("{rule}-{n}.co"));
        std::fs::write(&p, &bad).unwrap();
        let v = Command::new(BIN)
            .arg("verify")
            .arg(&path)
            .arg(&p)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&v.stdout).into_owned();
        if !text.contains(&format!("hazard {rule}:")) {
            continue;
        }
        assert!(
            !v.status.success(),
            "{fixture} {rule}: verify accepted\n{text}"
        );
        let (before, after) = (llvm_waits(&out, from, to), llvm_waits(&bad, from, to));
        assert!(
            after > before,
            "{fixture} {rule}: LLVM adds {after} wait(s) after the mutation, {before} before"
        );
        eprintln!("{rule}: {fixture} site {n}: verify rejects; LLVM adds {after} wait(s) (unedited: {before})");
        return true;
    }
    false
}
