//! Issue 13: register sets of 16-bit VGPR halves and two-part (VOP3PX2) instructions, against
//! llvm-mc-22 encodings (`echo 'v_add_f16_e32 v1.l, v2.l, v2.h' | llvm-mc-22 -mcpu=gfx1250
//! -mattr=+real-true16 -show-encoding` = 0x64030502; the gfx950 repro of the issue).
mod common;

use amdgpu_isa::{decode, decode_all, Target};

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `v2.h` is field value v130 in a 32-bit VOP2 encoding: both 16-bit modes must name v2
/// (the rewriter's liveness), never v130.
#[test]
fn high_half_names_the_full_vgpr_in_both_modes() {
    for name in ["gfx1100", "gfx1201", "gfx1250"] {
        let t = Target::from_name(name).unwrap();
        for t in [t.with_true16(false), t.with_true16(true)] {
            let i = decode(&bytes(&[0x6403_0502]), t).unwrap();
            let r = i.reads();
            assert!(r.contains_vgpr(2), "{name} true16={}: {i}", t.true16());
            assert!(!r.contains_vgpr(130), "{name} true16={}: {i}", t.true16());
            assert!(i.writes().contains_vgpr(1));
        }
    }
    let t = Target::from_name("gfx1250").unwrap().with_true16(true);
    assert_eq!(
        decode(&bytes(&[0x6403_0502]), t).unwrap().to_string(),
        "v_add_f16_e32 v1.l, v2.l, v2.h"
    );
}

/// gfx950 `v_mfma_scale_f32_16x16x128_f8f6f4` (issue repro): ONE 16-byte instruction that
/// reads the MFMA sources and both scale VGPRs; the prefix alone stays 8 bytes.
#[test]
fn vop3px2_is_one_instruction() {
    let t = Target::from_name("gfx950").unwrap();
    let b = bytes(&[0xd3ac_0000, 0x0002_9b4e, 0xd3ad_0c02, 0x8202_0d0a]);
    let all = decode_all(&b, t).unwrap();
    assert_eq!(all.len(), 1);
    let i = &all[0];
    assert_eq!(i.len(), 16);
    assert_eq!(i.bytes(), &b[..]);
    assert_eq!(
        i.to_string(),
        "v_mfma_scale_f32_16x16x128_f8f6f4 v[2:5], v[10:13], v[6:9], 0, v78, v77 op_sel_hi:[0,0,0] cbsz:4 blgp:4"
    );
    let r = i.reads();
    for v in [6, 9, 10, 13, 77, 78] {
        assert!(r.contains_vgpr(v), "reads v{v}");
    }
    assert!(!r.contains_vgpr(14), "fp4 src0 is 4 VGPRs");
    let w = i.writes();
    assert!((2..=5).all(|v| w.contains_vgpr(v)) && !w.contains_vgpr(78));
    // The prefix followed by something else is the 8-byte v_mfma_ld_scale_b32.
    let b2 = bytes(&[0xd3ac_0000, 0x0002_9b4e, 0xbf80_0000]);
    assert_eq!(decode(&b2, t).unwrap().len(), 8);
}

/// llvm-mc-22's text for one encoding (`--disassemble`, default attributes of `mcpu`).
fn llvm_mc_text(mcpu: &str, b: &[u8]) -> String {
    use std::io::Write;
    let line: Vec<String> = b.iter().map(|x| format!("{x:#04x}")).collect();
    let mut c = std::process::Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args([
            "-triple=amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "--disassemble",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run llvm-mc-22");
    c.stdin
        .take()
        .unwrap()
        .write_all(line.join(" ").as_bytes())
        .unwrap();
    let o = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// gfx940-line fp8/bf8 → f32 conversions in SDWA form have no `dst_sel`/`dst_unused` operands
/// (aiter's `v_cvt_pk_f32_fp8_sdwa v[180:181], v178 src0_sel:WORD_0`, 2,868 instructions that
/// printed `dst_sel:DWORD dst_unused:UNUSED_PAD`). Text must equal llvm-mc-22's for every
/// source select, clamp/omod, `sext`, an SGPR source and every dst_unused value.
#[test]
fn sdwa_fp8_conversions_print_like_llvm() {
    if common::no_llvm() {
        return;
    }
    let mut n = 0;
    for mcpu in ["gfx942", "gfx950"] {
        let t = Target::from_name(mcpu).unwrap();
        // VOP1 opcodes 84..=87: v_cvt_f32_fp8, v_cvt_f32_bf8, v_cvt_pk_f32_fp8, v_cvt_pk_f32_bf8.
        for op in 84u32..=87 {
            let w0 = 0x7e00_0000 | (4 << 17) | (op << 9) | 249;
            for w1 in [
                0x0004_0602u32, // src0_sel:WORD_0 (dst_sel DWORD, the only valid value)
                0x0005_0602,    // WORD_1
                0x0000_0602,    // BYTE_0
                0x0003_0602,    // BYTE_3
                0x0004_0e02,    // dst_unused:UNUSED_SEXT (not printed by LLVM)
                0x0004_1602,    // dst_unused:UNUSED_PRESERVE
                0x000c_0602,    // sext(v2)
                0x0004_a602,    // clamp mul:4
                0x0004_c602,    // div:2
                0x0085_0602,    // s2 (SDWA bit 23: scalar source)
            ] {
                let b = bytes(&[w0, w1]);
                let ours = decode(&b, t).unwrap();
                assert_eq!(ours.len(), 8);
                let llvm = llvm_mc_text(mcpu, &b);
                assert_eq!(ours.to_string(), llvm, "{mcpu} {w0:#010x} {w1:#010x}");
                n += 1;
            }
        }
    }
    assert_eq!(n, 80);
}
