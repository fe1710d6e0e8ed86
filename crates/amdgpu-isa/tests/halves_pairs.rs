//! Issue 13: register sets of 16-bit VGPR halves and two-part (VOP3PX2) instructions, against
//! llvm-mc-22 encodings (`echo 'v_add_f16_e32 v1.l, v2.l, v2.h' | llvm-mc-22 -mcpu=gfx1250
//! -mattr=+real-true16 -show-encoding` = 0x64030502; the gfx950 repro of the issue).
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
