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

/// Runs llvm-mc-22 on `input` with `args`; its non-directive output lines.
fn llvm_mc(mcpu: &str, args: &[&str], input: &str) -> Vec<String> {
    use std::io::Write;
    let mut c = std::process::Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args(["-triple=amdgcn-amd-amdhsa", &format!("-mcpu={mcpu}")])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run llvm-mc-22");
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .map(String::from)
        .collect()
}

/// The encoding llvm-mc-22 gives `asm` (`-show-encoding`).
fn llvm_mc_encode(mcpu: &str, asm: &str) -> Vec<u8> {
    let out = llvm_mc(mcpu, &["-show-encoding"], asm);
    let l = out
        .first()
        .unwrap_or_else(|| panic!("{mcpu}: {asm}: no output"));
    let enc = l
        .split("encoding: [")
        .nth(1)
        .unwrap_or_else(|| panic!("{mcpu}: {asm}: {l}"));
    enc.trim_end_matches(']')
        .split(',')
        .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).unwrap())
        .collect()
}

/// SDWA text of conversions whose mnemonic names a float type but whose source is an integer
/// or fp8/bf8 value (real cases: aiter's 2,868 `v_cvt_pk_f32_fp8_sdwa` printed a `dst_sel` LLVM
/// has no operand for; onnxruntime gfx908's 104 `v_cvt_f32_i32_sdwa v8, sext(v5)` lost the
/// `sext`). Each form is assembled and disassembled by llvm-mc-22; our text must equal LLVM's.
#[test]
fn sdwa_conversions_print_like_llvm() {
    if common::no_llvm() {
        return;
    }
    let fp8 = [
        "v_cvt_pk_f32_fp8_sdwa v[180:181], v178 src0_sel:WORD_0",
        "v_cvt_pk_f32_fp8_sdwa v[182:183], v178 src0_sel:WORD_1",
        "v_cvt_pk_f32_fp8_sdwa v[4:5], s2 src0_sel:WORD_0",
        "v_cvt_f32_fp8_sdwa v4, v2 src0_sel:BYTE_3",
        "v_cvt_f32_bf8_sdwa v4, v2 clamp mul:4 src0_sel:BYTE_1",
        "v_cvt_f32_fp8_sdwa v4, v2 div:2 src0_sel:BYTE_0",
    ];
    let int = [
        "v_cvt_f32_i32_sdwa v8, sext(v5) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_0",
        "v_cvt_f32_i32_sdwa v8, sext(v5) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1",
        "v_cvt_f32_u32_sdwa v8, sext(v5) dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_0",
        "v_cvt_f32_ubyte0_sdwa v1, sext(v2) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD",
        "v_cvt_f16_u16_sdwa v1, sext(v2) dst_sel:WORD_0 dst_unused:UNUSED_PAD src0_sel:WORD_1",
        "v_cvt_f16_i16_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_SEXT src0_sel:WORD_0",
        "v_cvt_off_f32_i4_sdwa v1, sext(v2) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_2",
        // Float sources keep neg/abs.
        "v_cvt_i32_f32_sdwa v1, -|v2| dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD",
        "v_cvt_f32_f16_sdwa v1, -v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1",
    ];
    let mut n = 0;
    for mcpu in [
        "gfx900", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1010", "gfx1030",
    ] {
        let t = Target::from_name(mcpu).unwrap();
        let gfx94x = matches!(mcpu, "gfx942" | "gfx950");
        for asm in int.iter().chain(if gfx94x { &fp8[..] } else { &[] }) {
            n += same_text(mcpu, t, &llvm_mc_encode(mcpu, asm), asm);
        }
        // Forms llvm-mc-22 prints but does not assemble: `sext` on an fp8 source (VOP1 opcodes
        // 84 v_cvt_f32_fp8, 86 v_cvt_pk_f32_fp8; SDWA bit 19), dst_unused bits set (ignored).
        if gfx94x {
            for w in [
                [0x7e08_a8f9u32, 0x000c_0602],
                [0x7e08_acf9, 0x000c_0602],
                [0x7e08_acf9, 0x0004_1602],
            ] {
                let b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
                n += same_text(mcpu, t, &b, &format!("{w:#010x?}"));
            }
        }
    }
    assert_eq!(n, 7 * 9 + 2 * (6 + 3));
}

/// Asserts that our decoding of `b` has its length and llvm-mc-22's text; returns 1.
fn same_text(mcpu: &str, t: Target, b: &[u8], what: &str) -> usize {
    let ours = decode(b, t).unwrap();
    assert_eq!(ours.len(), b.len(), "{mcpu} {what}");
    let hex: Vec<String> = b.iter().map(|x| format!("{x:#04x}")).collect();
    let llvm = llvm_mc(mcpu, &["--disassemble"], &hex.join(" "));
    assert_eq!(vec![ours.to_string()], llvm, "{mcpu} {what}");
    1
}
