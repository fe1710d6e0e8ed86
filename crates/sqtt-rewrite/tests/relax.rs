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

#[test]
fn out_of_range_branches_get_islands() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    for (mcpu, wave) in [
        ("gfx942", 64),
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
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("out.co");
        std::fs::write(&f, &bytes).unwrap();
        let dis = Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
            .arg("-d")
            .arg(&f)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&dis.stdout);
        assert!(!text.contains("<unknown>"), "{mcpu}");
        let long = if mcpu == "gfx1250" {
            "s_add_pc_i64"
        } else {
            "s_setpc_b64"
        };
        assert_eq!(text.matches(long).count(), 1, "{mcpu}: one island expected");
    }
}
