//! Hazards from original code into inserted code (issue 29 item 3), on
//! `fixtures/objects/{gfx1153,gfx1201}__hazards__O3.co` (from `fixtures/src/hazards.S`):
//! - gfx1153 `k_trans`: an address VGPR written by `v_sqrt_f32` / `v_rcp_f32` (transcendental)
//!   right before a traced load; the address-trace loop's `v_readlane_b32` must come after
//!   `s_waitcnt_depctr` with `va_vdst(0)` or 6 VALUs (LLVM 22 `fixVALUTransUseHazard`), also on
//!   the branch edge that reaches the second load straight from the `v_rcp_f32`;
//! - gfx1201 `k_setpc`: a back edge relaxed into a long-branch island right after a VALU write
//!   of VCC; the island's `s_setpc_b64` must come after a wait committing SALU, VALU and VCC
//!   writes (LLVM 22 `AMDGPUWaitSGPRHazards`, IsSetPC).
//!
//! Oracles: llvm-objdump-22's disassembly of the output (the waits and where the branches land)
//! and the independent verifier (`sqtt_verify::verify`).
use sqtt_rewrite::config::{Options, TraceAddresses};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::Path;
use std::process::Command;

fn fixture(target: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(format!("{target}__hazards__O3.co"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Instruments `target`'s fixture with `--trace-addresses memory,lds`, checks it is instrumented
/// and accepted by the verifier; returns llvm-objdump-22's lines `(address, text)`.
fn instrument(target: &str) -> Vec<(u64, String)> {
    let input = fixture(target);
    let opts = Options {
        trace_addresses: Some(TraceAddresses {
            memory: true,
            lds: true,
        }),
        ..Options::default()
    };
    let out = rewrite(&input, &opts).expect("rewrite");
    assert_eq!(
        out.report.status,
        Status::Instrumented,
        "{target}: {:?}",
        out.report.reasons
    );
    let bytes = out.bytes.expect("output");
    let v = sqtt_verify::verify(&input, &bytes).expect("verify");
    assert!(
        v.findings.is_empty(),
        "{target}: {:?}",
        v.findings.iter().map(|f| f.to_string()).collect::<Vec<_>>()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("out.co");
    std::fs::write(&f, &bytes).expect("write");
    let dis = Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
        .arg("-d")
        .arg(&f)
        .output()
        .expect("llvm-objdump-22");
    assert!(dis.status.success());
    String::from_utf8_lossy(&dis.stdout)
        .lines()
        .filter_map(|l| {
            let (text, addr) = l.trim().split_once("//")?;
            let addr = u64::from_str_radix(addr.trim().split(':').next()?, 16).ok()?;
            Some((addr, text.trim().to_string()))
        })
        .collect()
}

/// The immediate of a dependency-counter wait (`s_waitcnt_depctr 0xfff` / `s_wait_alu ...`),
/// assembled back with llvm-mc-22 when printed symbolically.
fn depctr_imm(text: &str, mcpu: &str) -> Option<u16> {
    if !(text.starts_with("s_waitcnt_depctr") || text.starts_with("s_wait_alu")) {
        return None;
    }
    let mut mc = Command::new("/usr/lib/llvm-22/bin/llvm-mc")
        .args(["-triple=amdgcn", &format!("-mcpu={mcpu}"), "-show-encoding"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("llvm-mc-22");
    use std::io::Write;
    mc.stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = mc.wait_with_output().expect("llvm-mc-22");
    let s = String::from_utf8_lossy(&out.stdout);
    let enc = s.split("encoding: [").nth(1)?;
    let b: Vec<u8> = enc
        .split(&[',', ']'][..])
        .take(2)
        .filter_map(|x| u8::from_str_radix(x.trim().trim_start_matches("0x"), 16).ok())
        .collect();
    Some(u16::from_le_bytes([*b.first()?, *b.get(1)?]))
}

#[test]
fn trans_results_reach_inserted_readlanes_after_a_va_vdst_wait() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dis = instrument("gfx1153");
    let trans: Vec<usize> = (0..dis.len())
        .filter(|&k| dis[k].1.starts_with("v_sqrt_f32") || dis[k].1.starts_with("v_rcp_f32"))
        .collect();
    assert_eq!(
        trans.len(),
        2,
        "k_trans has one v_sqrt_f32 and one v_rcp_f32"
    );
    // Address order: between each transcendental write of v1 and the next v_readlane of v1,
    // a va_vdst(0) wait or 6 VALUs.
    for &k in &trans {
        let read = (k + 1..dis.len())
            .find(|&j| dis[j].1.starts_with("v_readlane_b32") && dis[j].1.contains(", v1,"))
            .expect("a v_readlane of v1 after the transcendental write");
        let between = &dis[k + 1..read];
        let waited = between
            .iter()
            .any(|(_, t)| depctr_imm(t, "gfx1153").is_some_and(|m| m & 0xf000 == 0));
        let valus = between.iter().filter(|(_, t)| t.starts_with("v_")).count();
        assert!(
            waited || valus >= 6,
            "{:?} → {:?}: no va_vdst(0) wait and {valus} VALUs",
            dis[k],
            dis[read]
        );
    }
    // The branch after v_rcp_f32 lands on a va_vdst(0) wait: on that edge v1 comes straight from
    // the v_rcp_f32 (the fall-through path's 6 VALUs are skipped).
    let rcp = trans[1];
    // (The inserted loops branch backward: the first forward s_cbranch_scc1 is the original.)
    let offset = |t: &str| -> Option<i64> {
        let rest = t.strip_prefix("s_cbranch_scc1")?;
        rest.trim().parse::<i64>().ok().filter(|&o| o < 0x8000)
    };
    let br = (rcp..dis.len())
        .find(|&j| offset(&dis[j].1).is_some())
        .expect("the original branch after v_rcp_f32");
    let off = offset(&dis[br].1).expect("branch offset");
    let dest = (dis[br].0 as i64 + 4 + off * 4) as u64;
    let landing = dis
        .iter()
        .find(|(a, _)| *a == dest)
        .expect("the branch lands on an instruction");
    assert!(
        depctr_imm(&landing.1, "gfx1153").is_some_and(|m| m & 0xf000 == 0),
        "the branch lands on {landing:?}"
    );
}

#[test]
fn long_branch_island_setpc_commits_a_valu_write_of_vcc() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dis = instrument("gfx1201");
    let setpcs: Vec<usize> = (0..dis.len())
        .filter(|&k| dis[k].1.starts_with("s_setpc_b64"))
        .collect();
    assert_eq!(setpcs.len(), 1, "one long-branch island");
    let before = &dis[setpcs[0] - 1].1;
    // sa_sdst (bit 0), va_vcc (bit 1) and va_sdst (bits 11:9) all 0.
    let m = depctr_imm(before, "gfx1201").expect("a wait right before s_setpc_b64");
    assert_eq!(m & 0x0e03, 0, "{before}: {m:#x}");
}

/// gfx1153 `k_counter`: the original right before the traced store has the bytes of the
/// address-trace loop's counter init (`s_mov_b32 s0, 0`); the verifier accepts the output
/// (it once aligned the original with the inserted copy and entered the loop at its head).
#[test]
fn counter_init_equal_to_the_original_before_the_site_verifies() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dis = instrument("gfx1153");
    let inits = dis
        .iter()
        .filter(|(_, t)| t.starts_with("s_mov_b32 s0, 0") && t.trim_end().ends_with(", 0"))
        .count();
    assert!(
        inits >= 2,
        "the original and the loop's counter init: {inits}"
    );
}
