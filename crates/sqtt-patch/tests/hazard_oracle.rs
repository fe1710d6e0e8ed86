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

use amdgpu_isa::{Family, InstClass, Instruction, RegSet, Special, SpecialReg, Target};
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
                _ => return Some(lift_salu_named(i, &m.to_uppercase())?),
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
fn body(items: &[LaidOut], t: Target) -> Option<String> {
    let addr_idx: BTreeMap<u64, usize> =
        items.iter().enumerate().map(|(k, x)| (x.addr, k)).collect();
    let end = items.last().map_or(0, |x| x.addr + x.inst.len() as u64);
    let mut starts = std::collections::BTreeSet::new();
    starts.insert(0usize);
    for (k, x) in items.iter().enumerate() {
        if let Some(tg) = x.inst.branch_target(x.addr) {
            starts.insert(k + 1);
            starts.insert(*addr_idx.get(&tg).unwrap_or(&items.len()));
            if tg != end && !addr_idx.contains_key(&tg) {
                return None;
            }
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
            .map(|tg| bb_of(*addr_idx.get(&tg).unwrap_or(&items.len())))
            .flatten();
        writeln!(out, "    {}", lift(&x.inst, bb)?).ok()?;
    }
    writeln!(out, "  bb.{}:\n    S_ENDPGM 0", bb_of(items.len())?).ok()?;
    Some(out)
}

/// Context on one side: originals that lift, stopping at the first one that does not.
fn context<'a>(it: impl Iterator<Item = &'a LaidOut>, t: Target) -> Vec<LaidOut> {
    let mut v = Vec::new();
    for x in it {
        if x.inserted || v.len() == CONTEXT || x.inst.branch_target(x.addr).is_some() {
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
            let mut before = context(seq[..k].iter().rev(), t);
            before.reverse();
            let after = context(seq[e..].iter(), t);
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
