//! Branch relaxation: a conditional branch whose distance is right at the simm16 limit is pushed
//! out of range by a barrier marker inserted inside its span; the rewriter routes it through a
//! long-branch island (gfx9-gfx12: s_getpc/s_add/s_addc/s_setpc through a free SGPR pair;
//! gfx1250: s_add_pc_i64). Checked with llvm-objdump-22 and the independent verifier.

mod common;

use sqtt_rewrite::config::Options;
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::process::Command;

fn kernel(mcpu: &str, wave: u32) -> String {
    format!(
        r#".amdgcn_target "amdgcn-amd-amdhsa--{mcpu}"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_cmp_eq_u32 s0, 0
  s_cbranch_scc1 .Lfar
  {barrier}
  .rept {nops}
  s_nop 0
  .endr
.Lfar:
  s_endpgm
.Lk_end:
.size k, .Lk_end-k
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 16
  {w32}
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: 0
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .kernarg_segment_align: 4
    .wavefront_size: {wave}
    .sgpr_count: 16
    .vgpr_count: 8
    .max_flat_workgroup_size: 256
...
.end_amdgpu_metadata
"#,
        barrier = if mcpu.starts_with("gfx12") {
            "s_barrier_signal -1\n  s_barrier_wait -1"
        } else {
            "s_barrier"
        },
        // Distance in dwords after the branch: barrier instructions + nops = 32767 (the simm16
        // maximum) before insertion, so one more dword pushes the branch out of range.
        nops = if mcpu.starts_with("gfx12") {
            32765
        } else {
            32766
        },
        w32 = if wave == 32 && !mcpu.starts_with("gfx9") {
            ".amdhsa_wavefront_size32 1"
        } else if mcpu == "gfx942" {
            ".amdhsa_accum_offset 8"
        } else {
            ""
        }
    )
}

fn build(mcpu: &str, wave: u32) -> Vec<u8> {
    common::build_code_object("assembler", &kernel(mcpu, wave), mcpu, &[])
}

/// Standard output of LLVM 22 tool `tool` run with `flag` on `bytes` (written to a temporary
/// file).
fn llvm(tool: &str, flag: &str, bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out.co");
    std::fs::write(&f, bytes).unwrap();
    let out = Command::new(format!("/usr/lib/llvm-22/bin/{tool}"))
        .arg(flag)
        .arg(&f)
        .output()
        .unwrap_or_else(|e| panic!("{tool}-22: {e}"));
    assert!(out.status.success(), "{tool}-22 failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn out_of_range_branches_get_islands() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    for (mcpu, wave) in [
        ("gfx942", 64),
        ("gfx1010", 32),
        ("gfx1100", 32),
        ("gfx1200", 32),
        ("gfx1250", 32),
    ] {
        let input = build(mcpu, wave);
        let opts = Options {
            barriers: true,
            ..Options::default()
        };
        let out = rewrite(&input, &opts).unwrap();
        assert_eq!(
            out.report.status,
            Status::Instrumented,
            "{mcpu}: {:?}",
            out.report.reasons
        );
        assert_eq!(out.report.relaxed_branches, 1, "{mcpu}");
        let bytes = out.bytes.unwrap();
        let v = sqtt_verify::verify(&input, &bytes).unwrap();
        assert!(
            v.findings.is_empty(),
            "{mcpu}: {:?}",
            v.findings.iter().map(|f| f.to_string()).collect::<Vec<_>>()
        );
        let text = llvm("llvm-objdump", "-d", &bytes);
        assert!(!text.contains("<unknown>"), "{mcpu}");
        let long = if mcpu == "gfx1250" {
            "s_add_pc_i64"
        } else {
            "s_setpc_b64"
        };
        assert_eq!(text.matches(long).count(), 1, "{mcpu}: one island expected");
    }
}

/// gfx1010 (LDS → branch → VMEM hazard, LLVM 22 GCNHazardRecognizer
/// `checkLdsBranchVmemWARHazard`): an LDS load before the branch and a global load at its target.
/// The island's `s_setpc_b64` is one more branch between them, so the island ends with
/// `s_waitcnt_vscnt null, 0`. The verifier accepts the output and, with that wait overwritten by
/// `s_nop 0`, names the hazard.
#[test]
fn gfx1010_islands_wait_for_vector_stores() {
    let src = kernel("gfx1010", 32)
        .replace(
            "  s_cmp_eq_u32 s0, 0",
            "  ds_read_b32 v1, v0\n  s_cmp_eq_u32 s0, 0",
        )
        .replace(
            ".Lfar:\n  s_endpgm",
            ".Lfar:\n  global_load_dword v2, v[4:5], off\n  s_endpgm",
        );
    let input = common::build_code_object("assembler", &src, "gfx1010", &[]);
    let opts = Options {
        barriers: true,
        ..Options::default()
    };
    let out = rewrite(&input, &opts).expect("rewrite");
    assert_eq!(
        out.report.status,
        Status::Instrumented,
        "{:?}",
        out.report.reasons
    );
    assert_eq!(out.report.relaxed_branches, 1);
    let bytes = out.bytes.expect("rewritten");
    let v = sqtt_verify::verify(&input, &bytes).expect("verifier runs");
    assert!(v.is_clean(), "{:?}", v.findings);

    // The island's last two instructions as llvm-objdump-22 prints them, with their words.
    let text = llvm("llvm-objdump", "-d", &bytes);
    let lines: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| {
            let (ins, rest) = l.split_once("//")?;
            Some((ins.trim(), rest.split(':').nth(1)?.trim()))
        })
        .collect();
    let set = lines
        .iter()
        .position(|l| l.0.starts_with("s_setpc_b64"))
        .expect("island");
    assert_eq!(
        lines[set - 1].0,
        "s_waitcnt_vscnt null, 0x0",
        "{:?}",
        &lines[set - 4..=set]
    );
    assert!(
        lines[set - 4].0.starts_with("s_getpc_b64"),
        "{:?}",
        &lines[set - 4..=set]
    );
    let wait = u32::from_str_radix(lines[set - 1].1, 16).expect("word");

    // Mutation: the wait becomes s_nop 0.
    let at: Vec<usize> = (0..bytes.len() / 4)
        .map(|k| 4 * k)
        .filter(|&o| bytes[o..o + 4] == wait.to_le_bytes())
        .collect();
    assert_eq!(at.len(), 1, "one s_waitcnt_vscnt word in the output");
    let mut bad = bytes.clone();
    bad[at[0]..at[0] + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
    let v = sqtt_verify::verify(&input, &bad).expect("verifier runs");
    let findings: Vec<String> = v.findings.iter().map(|f| f.to_string()).collect();
    assert!(
        findings.iter().any(|f| f.to_lowercase().contains("lds")),
        "{findings:?}"
    );
}

/// `fixtures/src/relax_tail.S` (issue 39 item 4): a rotated loop whose back edge, an `s_branch`,
/// is the kernel's last instruction, in SOPP range as built and out of range once every load
/// carries an address-trace loop. Its long form trails it: llvm-objdump-22 must show the island's
/// `s_getpc_b64`/`s_add_u32`/`s_addc_u32` computing the loop head, llvm-readelf-22 the kernel
/// symbol ending after the island's `s_setpc_b64`, the verifier must accept the object (it
/// rejected the island as padding after the function) and reject it with the island aimed one
/// instruction short, and the interpreter, started at the branch, must leave the branch and
/// island at the loop head.
#[test]
fn relaxed_last_branch_stays_inside_its_function() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    for (t, wave) in [("gfx942", 64), ("gfx1100", 32)] {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/objects")
            .join(format!("{t}__relax-tail__O3.co"));
        let input = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let opts = Options {
            trace_addresses: sqtt_rewrite::config::parse_trace_addresses("memory,lds")
                .expect("option"),
            ..Options::default()
        };
        let out = rewrite(&input, &opts).expect("rewrite");
        assert_eq!(
            out.report.status,
            Status::Instrumented,
            "{t}: {:?}",
            out.report.reasons
        );
        assert!(
            out.report.skipped.is_empty(),
            "{t}: {:?}",
            out.report.skipped
        );
        assert_eq!(out.report.relaxed_branches, 1, "{t}");
        let bytes = out.bytes.expect("rewritten");
        let v = sqtt_verify::verify(&input, &bytes).expect("verifier runs");
        assert!(v.is_clean(), "{t}: {:?}", v.findings);

        let text = llvm("llvm-objdump", "-d", &bytes);
        // (address, instruction text) of every instruction line.
        let lines: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|l| {
                let (ins, rest) = l.split_once("//")?;
                let a = u64::from_str_radix(rest.trim().split(':').next()?, 16).ok()?;
                Some((a, ins.trim()))
            })
            .collect();
        let head = lines
            .iter()
            .find(|l| l.1 == "s_cmp_eq_u32 s8, 0")
            .expect("loop head")
            .0;
        let n = lines.len();
        let tail: Vec<&str> = lines[n - 5..].iter().map(|l| l.1).collect();
        assert!(tail[0].starts_with("s_branch "), "{t}: {tail:?}");
        assert!(tail[1].starts_with("s_getpc_b64 s["), "{t}: {tail:?}");
        assert!(tail[4].starts_with("s_setpc_b64 s["), "{t}: {tail:?}");
        // The adds' literals as llvm-objdump prints them (`0x...` or `lit(0x...)`).
        let literal = |s: &str| {
            let h = s.rsplit("0x").next().unwrap().trim_end_matches(')');
            u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("{t}: literal in {s}"))
        };
        let offset = (literal(tail[3]) << 32) | literal(tail[2]);
        let getpc = lines[n - 4].0;
        assert_eq!(
            (getpc + 4).wrapping_add(offset),
            head,
            "{t}: the long form jumps to the loop head"
        );
        let end = lines[n - 1].0 + 4;
        // Mutation: the island aimed one instruction short of the loop head must be rejected.
        let lo = (literal(tail[2]) as u32).to_le_bytes();
        let hits: Vec<usize> = (0..bytes.len() - 3)
            .filter(|&k| bytes[k..k + 4] == lo)
            .collect();
        assert_eq!(hits.len(), 1, "{t}: one low literal");
        let mut broken = bytes.clone();
        broken[hits[0]..hits[0] + 4]
            .copy_from_slice(&(u32::from_le_bytes(lo).wrapping_sub(4)).to_le_bytes());
        let v = sqtt_verify::verify(&input, &broken).expect("verifier runs");
        assert!(
            v.findings.iter().any(|x| x.to_string().contains("reaches")),
            "{t}: a misaimed trailing island is accepted: {:?}",
            v.findings
        );

        let syms = llvm("llvm-readelf", "-s", &bytes);
        let row: Vec<&str> = syms
            .lines()
            .find(|l| l.ends_with(" k_relax_tail") && l.contains(" FUNC "))
            .expect("kernel symbol")
            .split_whitespace()
            .collect();
        let value = u64::from_str_radix(row[1], 16).unwrap();
        let size: u64 = row[2].parse().unwrap();
        assert_eq!(value + size, end, "{t}: the symbol covers the island");

        // The branch and its island, run alone: the wave leaves them at the loop head.
        let co = hsaco::CodeObject::parse(&bytes).expect("parse");
        let sec = co.text().expect(".text");
        let code = co.section_data(sec);
        let from = lines[n - 5].0;
        let slice = &code[(from - sec.addr) as usize..(end - sec.addr) as usize];
        let target = amdgpu_isa::Target::from_name(t).unwrap();
        let mut w = sqtt_interp::Wave::new(target, wave).unwrap();
        let r = sqtt_interp::run(&mut w, slice, from, 16).expect("interpreter");
        assert_eq!(r.exit_pc, head, "{t}: exit at the loop head");
        assert_eq!(
            r.executed, 5,
            "{t}: s_branch and the four island instructions"
        );
    }
}

/// gfx1100 object with two kernels, each with a conditional branch right at the simm16 limit
/// over a barrier: in `k_scc` SCC is read at the branch target (`s_cselect_b32`), so the long
/// branch, which clobbers SCC, cannot relax it; `k_ok` relaxes. With `far2`, `k_ok` has a
/// second such branch right after the first, to one instruction past the first's target.
fn two_kernels(far2: bool) -> String {
    let kernel = |name: &str, at_target: &str, second: bool| {
        // Dwords from after each branch to its target: 32767, the simm16 maximum.
        let (inner_branch, nops, inner_label) = if second {
            (
                "  s_cbranch_scc0 .Lfar2_NAME\n",
                32765,
                "  s_nop 0\n.Lfar2_NAME:\n",
            )
        } else {
            ("", 32766, "")
        };
        format!(
            r#".globl NAME
.p2align 8
.type NAME,@function
NAME:
  s_cmp_eq_u32 s0, 0
  s_cbranch_scc1 .Lfar_NAME
{inner_branch}  s_barrier
  .rept {nops}
  s_nop 0
  .endr
.Lfar_NAME:
{inner_label}{at_target}  s_endpgm
.LNAME_end:
.size NAME, .LNAME_end-NAME
"#
        )
        .replace("NAME", name)
    };
    let meta = |name: &str| {
        format!(
            "  - .name: {name}\n    .symbol: {name}.kd\n    .kernarg_segment_size: 0\n    .group_segment_fixed_size: 0\n    .private_segment_fixed_size: 0\n    .kernarg_segment_align: 4\n    .wavefront_size: 32\n    .sgpr_count: 16\n    .vgpr_count: 8\n    .max_flat_workgroup_size: 256\n"
        )
    };
    let kd = |name: &str| {
        format!(
            ".amdhsa_kernel {name}\n  .amdhsa_next_free_vgpr 8\n  .amdhsa_next_free_sgpr 16\n  .amdhsa_wavefront_size32 1\n.end_amdhsa_kernel\n"
        )
    };
    format!(
        ".amdgcn_target \"amdgcn-amd-amdhsa--gfx1100\"\n.text\n{}{}.rodata\n.p2align 6\n{}{}.amdgpu_metadata\n---\namdhsa.version: [1, 2]\namdhsa.kernels:\n{}{}...\n.end_amdgpu_metadata\n",
        kernel("k_scc", "  s_cselect_b32 s1, s2, s3\n", false),
        kernel("k_ok", "", far2),
        kd("k_scc"),
        kd("k_ok"),
        meta("k_scc"),
        meta("k_ok"),
    )
}

/// Issue 29: a branch that inserted code pushes out of range and that cannot be relaxed costs
/// its function, not the object. `k_scc` is left alone (copied verbatim, its barrier site
/// skipped with the reason), `k_ok` is instrumented with its branch relaxed, and the verifier
/// accepts the output. Every branch one layout finds out of range is relaxed before the next
/// layout: `k_ok`'s two far branches (with `far2`) both get islands.
#[test]
fn a_branch_that_cannot_be_relaxed_costs_only_its_function() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    for far2 in [false, true] {
        let input = common::build_code_object("assembler", &two_kernels(far2), "gfx1100", &[]);
        let opts = Options {
            barriers: true,
            ..Options::default()
        };
        let out = rewrite(&input, &opts).unwrap();
        let r = &out.report;
        assert_eq!(r.status, Status::Instrumented, "{:?}", r.reasons);
        let alone: Vec<(&str, &str)> = r
            .left_alone
            .iter()
            .map(|l| (l.name.as_str(), l.why.as_str()))
            .collect();
        assert_eq!(alone.len(), 1, "{alone:?}");
        assert_eq!(alone[0].0, "k_scc");
        assert!(
            alone[0]
                .1
                .contains("cannot be relaxed: SCC is live at the branch target"),
            "{alone:?}"
        );
        assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
        assert_eq!(r.skipped[0].function, "k_scc");
        assert!(r.skipped[0].why.starts_with("function left alone"));
        assert_eq!(r.relaxed_branches, if far2 { 2 } else { 1 });
        let c = r
            .coverage
            .iter()
            .find(|c| c.feature == "barriers")
            .expect("barrier coverage");
        assert_eq!((c.instrumented, c.found), (1, 2));
        let bytes = out.bytes.expect("rewritten");
        let v = sqtt_verify::verify(&input, &bytes).unwrap();
        assert!(v.is_clean(), "{:?}", v.findings);
        let text = llvm("llvm-objdump", "-d", &bytes);
        assert!(!text.contains("<unknown>"));
        assert_eq!(
            text.matches("s_setpc_b64").count(),
            if far2 { 2 } else { 1 },
            "one island per relaxed branch"
        );
    }
}

/// The compiler's own long branch (LLVM's branch relaxation, as in Debian's RCCL for gfx908),
/// entered by a branch from elsewhere and preceded by an `s_branch` that jumps away: the block
/// has the shape of the rewriter's long-branch islands, but it is original code. The verifier
/// took it for an island, so the object did not even verify against itself (1.4 million
/// findings on RCCL gfx908); it must verify against itself and after instrumentation.
fn compiler_long_branch(mcpu: &str) -> String {
    r#".amdgcn_target "amdgcn-amd-amdhsa--MCPU"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_cmp_eq_u32 s0, 0
  s_cbranch_scc1 .Llong
  s_cbranch_execz .Ljoin
  v_mov_b32 v1, 0
  s_branch .Lelse
.Llong:
  s_getpc_b64 s[34:35]
.Lpc:
  s_add_u32 s34, s34, .Lfar-.Lpc
  s_addc_u32 s35, s35, lit(0)
  s_setpc_b64 s[34:35]
.Ljoin:
  s_or_b64 exec, exec, s[18:19]
.Lelse:
  s_barrier
.Lfar:
  s_barrier
  s_endpgm
.Lk_end:
.size k, .Lk_end-k
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 40
  ACCUM
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: 0
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .kernarg_segment_align: 4
    .wavefront_size: 64
    .sgpr_count: 40
    .vgpr_count: 8
    .max_flat_workgroup_size: 256
...
.end_amdgpu_metadata
"#
    .replace("MCPU", mcpu)
    .replace(
        "ACCUM",
        if mcpu == "gfx90a" || mcpu == "gfx942" {
            ".amdhsa_accum_offset 8"
        } else {
            ""
        },
    )
}

#[test]
fn the_compilers_own_long_branch_is_original_code() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    for mcpu in ["gfx908", "gfx90a", "gfx942"] {
        let input = common::build_code_object("assembler", &compiler_long_branch(mcpu), mcpu, &[]);
        let v = sqtt_verify::verify(&input, &input).unwrap();
        assert!(v.is_clean(), "{mcpu}: identity: {:?}", v.findings);
        let opts = Options {
            barriers: true,
            ..Options::default()
        };
        let out = rewrite(&input, &opts).unwrap();
        assert_eq!(
            out.report.status,
            Status::Instrumented,
            "{mcpu}: {:?}",
            out.report.reasons
        );
        let bytes = out.bytes.expect("rewritten");
        let v = sqtt_verify::verify(&input, &bytes).unwrap();
        assert!(v.is_clean(), "{mcpu}: {:?}", v.findings);
        assert!(v.inserted_instructions() > 0, "{mcpu}: markers inserted");
    }
}
