//! DPP and SDWA text (part of [`crate::display`]): the `dpp_ctrl`, row/bank masks and
//! `bound_ctrl`/`fi` of DPP, the `dst_sel`/`src*_sel`/`dst_unused` of SDWA, and their source
//! modifiers, following LLVM's `AMDGPUInstPrinter` (`printDppCtrl`, `printSDWASel`).

use super::{fp_mods, range};
use crate::decode::Instruction;
use crate::{Family, Format};
use std::fmt::Write as _;

impl Instruction {
    /// Is the operand with this field float-typed? (Mnemonic type suffix; LLVM prints
    /// `neg`/`abs` DPP/SDWA source modifiers for float operands and `sext` for integer ones.)
    pub(super) fn float_op(&self) -> bool {
        let m = self.mnemonic();
        ["_f16", "_f32", "_f64", "_bf16"]
            .iter()
            .any(|s| m.contains(s))
    }

    /// Source with DPP/SDWA modifiers: float `-|x|`, integer `sext(x)`.
    fn ext_src(&self, text: String, neg: bool, abs: bool, sext: bool) -> String {
        if self.float_op() {
            let t = if abs { format!("|{text}|") } else { text };
            if neg {
                format!("-{t}")
            } else {
                t
            }
        } else if sext || neg {
            format!("sext({text})")
        } else {
            text
        }
    }

    /// `dpp_ctrl` text (LLVM `AMDGPUInstPrinter::printDppCtrl`, `DppCtrl` in SIDefines.h).
    pub(super) fn dpp_ctrl_text(&self, c: u32) -> String {
        let fam = self.target.family();
        let n = self.target.name();
        let gfx90a_plus = n == "gfx90a" || self.is_gfx94x();
        // DP ALU DPP (64-bit vdst or src0 on gfx90a+) allows only row_newbcast (LLVM
        // `isDPALU_DPP`, `isLegalDPALU_DPPControl`).
        let dp = ["vdst", "src0"]
            .iter()
            .any(|f| self.src_width_of(f) == Some(2));
        if dp && gfx90a_plus && !(0x150..=0x15f).contains(&c) {
            return " /* DP ALU dpp only supports row_newbcast */".into();
        }
        match c {
            0..=0xff => format!(
                "quad_perm:[{},{},{},{}]",
                c & 3,
                (c >> 2) & 3,
                (c >> 4) & 3,
                (c >> 6) & 3
            ),
            0x101..=0x10f => format!("row_shl:{}", c & 0xf),
            0x111..=0x11f => format!("row_shr:{}", c & 0xf),
            0x121..=0x12f => format!("row_ror:{}", c & 0xf),
            0x130 if fam == Family::Gfx9 => "wave_shl:1".into(),
            0x134 if fam == Family::Gfx9 => "wave_rol:1".into(),
            0x138 if fam == Family::Gfx9 => "wave_shr:1".into(),
            0x13c if fam == Family::Gfx9 => "wave_ror:1".into(),
            0x130 => "/* wave_shl is not supported starting from GFX10 */".into(),
            0x134 => "/* wave_rol is not supported starting from GFX10 */".into(),
            0x138 => "/* wave_shr is not supported starting from GFX10 */".into(),
            0x13c => "/* wave_ror is not supported starting from GFX10 */".into(),
            0x140 => "row_mirror".into(),
            0x141 => "row_half_mirror".into(),
            0x142 if fam == Family::Gfx9 => "row_bcast:15".into(),
            0x143 if fam == Family::Gfx9 => "row_bcast:31".into(),
            0x142 | 0x143 => "/* row_bcast is not supported starting from GFX10 */".into(),
            0x150..=0x15f if gfx90a_plus => format!("row_newbcast:{}", c & 0xf),
            0x150..=0x15f if fam >= Family::Gfx10 => format!("row_share:{}", c & 0xf),
            0x150..=0x15f => {
                " /* row_newbcast/row_share is not supported on ASICs earlier than GFX90A/GFX10 */"
                    .into()
            }
            0x160..=0x16f if fam >= Family::Gfx10 => format!("row_xmask:{}", c & 0xf),
            0x160..=0x16f => "/* row_xmask is not supported on ASICs earlier than GFX10 */".into(),
            _ => "/* Invalid dpp_ctrl value */".into(),
        }
    }

    /// Whether SDWA src0 is an integer operand (modifier `sext`, no neg/abs) although the
    /// mnemonic names a float type: conversions from an integer, byte or fp8/bf8 source
    /// (`v_cvt_f32_i32`, `v_cvt_f16_u16`, `v_cvt_f32_ubyte0`, `v_cvt_off_f32_i4`,
    /// `v_cvt_pk_f32_fp8`, ...; the source type is the last part of the name). `llvm-mc-22
    /// --disassemble` prints `sext(v5)` for these with SDWA bit 19 set (every VOP1 opcode of
    /// gfx900, gfx908, gfx90a, gfx942, gfx950, gfx1010, gfx1030 probed).
    fn sdwa_int_src0(&self) -> bool {
        let m = self.mnemonic();
        let m = m.strip_suffix("_e32").unwrap_or(m);
        m.starts_with("v_cvt_")
            && m.rsplit('_').next().is_some_and(|src| {
                matches!(src, "i16" | "u16" | "i32" | "u32" | "i4" | "fp8" | "bf8")
                    || src.starts_with("ubyte")
            })
    }

    /// The gfx940-line fp8/bf8 → f32 conversions (`v_cvt_f32_fp8`, `v_cvt_f32_bf8`,
    /// `v_cvt_pk_f32_fp8`, `v_cvt_pk_f32_bf8`). Their SDWA form (LLVM 22 `VOP1Instructions.td`,
    /// the fp8 conversion profile) has no `dst_sel`/`dst_unused` operands (dst_sel is fixed to
    /// DWORD, dst_unused ignored) and an integer source (`sext`, no neg/abs): `llvm-mc-22
    /// -mcpu=gfx942/gfx950 --disassemble` prints so. Checked for every VOP1/VOP2 opcode of
    /// gfx900, gfx90a, gfx942, gfx950, gfx1010 and gfx1030: these four are the only SDWA forms
    /// without dst_sel.
    fn is_fp8_to_f32_sdwa_profile(&self) -> bool {
        let m = self.mnemonic();
        matches!(
            m.strip_suffix("_e32").unwrap_or(m),
            "v_cvt_f32_fp8" | "v_cvt_f32_bf8" | "v_cvt_pk_f32_fp8" | "v_cvt_pk_f32_bf8"
        )
    }

    /// VOP1/VOP2/VOPC with src0 = 250 (DPP16), 233/234 (DPP8) or 249 (SDWA, gfx9/gfx10): the
    /// `_dpp`/`_sdwa` mnemonic, the real src0 from dword 1 and the control suffixes (ISA
    /// manuals "VOP_DPP"/"VOP_DPP8"/"VOP_SDWA" microcode formats).
    pub(super) fn dpp_sdwa(&self, out: &mut String) {
        if !matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc) {
            return;
        }
        let Some(src0) = self.field("src0") else {
            return;
        };
        let fam = self.target.family();
        let kind = match src0 {
            250 => "dpp",
            233 | 234 if fam >= Family::Gfx10 => "dpp8",
            249 if fam <= Family::Gfx10 => "sdwa",
            _ => return,
        };
        let w1 = self.word(1);
        let bit = |b: u32| w1 & (1 << b) != 0;
        let Some(p) = out.find("<invalid>") else {
            return;
        };
        let s0 = w1 & 0xff;
        let src = match kind {
            "sdwa" if bit(23) => self.scalar_text(s0, 1),
            _ if self.src_width_of("src0") == Some(2) => range("v", s0, 2),
            // true16: bit 7 of the VGPR number selects the high half.
            _ if self.src_is_16bit("src0") => {
                format!("v{}.{}", s0 & 0x7f, if s0 & 0x80 != 0 { 'h' } else { 'l' })
            }
            _ => format!("v{s0}"),
        };
        // v_cndmask_b32 takes float source modifiers too (LLVM VOP2 cndmask profile).
        let cnd = self.mnemonic().starts_with("v_cndmask_b32");
        let float = self.float_op() || cnd;
        let src = match kind {
            // DPP16 neg/abs apply to float operands only (no `sext` in DPP).
            "dpp" => fp_mods(src, float && bit(20), float && bit(21)),
            "sdwa" if cnd => fp_mods(src, bit(20), bit(21)),
            "sdwa" if self.sdwa_int_src0() => {
                if bit(19) {
                    format!("sext({src})")
                } else {
                    src
                }
            }
            "sdwa" => self.ext_src(src, bit(20), bit(21), bit(19)),
            _ => src,
        };
        out.replace_range(p..p + "<invalid>".len(), &src);
        // Second source (VOP2/VOPC vsrc1) modifiers; SDWA bit 31 (`s1`) makes it a scalar
        // operand. v_ldexp and v_cmp*_class_f32/f64 take an integer src1 (no neg/abs).
        if self.fmt.format != Format::Vop1 && kind != "dpp8" {
            if let Some(plain) = self.field_text("vsrc1") {
                let m = self.mnemonic();
                let f1 = float
                    && !m.contains("_class_f32")
                    && !m.contains("_class_f64")
                    && !m.starts_with("v_ldexp");
                let (neg, abs, sext) = if kind == "dpp" {
                    (f1 && bit(22), f1 && bit(23), false)
                } else {
                    (f1 && bit(28), f1 && bit(29), bit(27))
                };
                let base = match (kind, self.field("vsrc1")) {
                    ("sdwa", Some(v1)) if bit(31) => self.scalar_text(v1, 1),
                    _ => plain.clone(),
                };
                let t = if f1 {
                    fp_mods(base, neg, abs)
                } else if sext {
                    format!("sext({base})")
                } else {
                    base
                };
                if t != plain {
                    let at = p + src.len();
                    if let Some(q) = out[at..].find(&format!(", {plain}")) {
                        let q = at + q + 2;
                        out.replace_range(q..q + plain.len(), &t);
                        // gfx12+ prints cndmask's `|src1|` closing after the mask operand
                        // (llvm-mc-22: `v_cndmask_b32_dpp v1, v2, |v3, vcc_lo|`).
                        let end = q + t.len();
                        if cnd && abs && fam >= Family::Gfx12 && out[..end].ends_with('|') {
                            out.remove(end - 1);
                            // After the next operand (the mask): its following space.
                            if let Some(c) = out[end - 1..].find(", ").map(|c| end - 1 + c + 2) {
                                let e = out[c..].find(' ').map_or(out.len(), |x| c + x);
                                out.insert(e, '|');
                            }
                        }
                    }
                }
            }
        }
        // Mnemonic suffix: gfx11+ VOPC DPP prints the plain name.
        let mn_end = out.find(' ').unwrap_or(out.len());
        let base = out[..mn_end].trim_end_matches("_e32").to_string();
        let mn = if fam >= Family::Gfx11 && self.fmt.format == Format::Vopc {
            base
        } else {
            format!("{base}_{}", if kind == "dpp8" { "dpp" } else { kind })
        };
        out.replace_range(..mn_end, &mn);
        match kind {
            "dpp" => {
                let _ = write!(
                    out,
                    " {} row_mask:{:#x} bank_mask:{:#x}",
                    self.dpp_ctrl_text((w1 >> 8) & 0x1ff),
                    w1 >> 28,
                    (w1 >> 24) & 0xf
                );
                if bit(19) {
                    out.push_str(" bound_ctrl:1");
                }
                if fam >= Family::Gfx10 && bit(18) {
                    out.push_str(" fi:1");
                }
            }
            "dpp8" => {
                let sel: Vec<String> = (0..8)
                    .map(|i| ((w1 >> (8 + 3 * i)) & 7).to_string())
                    .collect();
                let _ = write!(out, " dpp8:[{}]", sel.join(","));
                if src0 == 234 {
                    out.push_str(" fi:1");
                }
            }
            _ => {
                const SEL: [&str; 8] = [
                    "BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD", "7",
                ];
                const UNUSED: [&str; 4] = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE", "3"];
                if self.fmt.format != Format::Vopc {
                    if bit(13) {
                        out.push_str(" clamp");
                    }
                    // omod (bits 14..=15), gfx9 and gfx10 alike.
                    match (w1 >> 14) & 3 {
                        1 => out.push_str(" mul:2"),
                        2 => out.push_str(" mul:4"),
                        3 => out.push_str(" div:2"),
                        _ => {}
                    }
                    if !self.is_fp8_to_f32_sdwa_profile() {
                        let _ = write!(
                            out,
                            " dst_sel:{} dst_unused:{}",
                            SEL[((w1 >> 8) & 7) as usize],
                            UNUSED[((w1 >> 11) & 3) as usize]
                        );
                    }
                } else if bit(15) {
                    // VOPC SDWA (SDWAB): bit 15 `sd` selects the SGPR destination in bits
                    // 8..=14 instead of VCC (a pair in wave64 gfx9); no clamp.
                    let w = if fam == Family::Gfx9 { 2 } else { 1 };
                    let sd = self.scalar_text((w1 >> 8) & 0x7f, w);
                    let mn_end = out.find(' ').unwrap_or(out.len());
                    for vcc in [" vcc_lo,", " vcc,"] {
                        if let Some(q) = out[mn_end..].find(vcc).map(|q| q + mn_end) {
                            if q == mn_end {
                                out.replace_range(q + 1..q + vcc.len() - 1, &sd);
                                break;
                            }
                        }
                    }
                }
                let _ = write!(out, " src0_sel:{}", SEL[((w1 >> 16) & 7) as usize]);
                if self.fmt.format != Format::Vop1 {
                    let _ = write!(out, " src1_sel:{}", SEL[((w1 >> 24) & 7) as usize]);
                }
            }
        }
    }
}
