//! Text details the `{field}` templates cannot carry, for the VALU encodings of this module:
//! VOPD3 `neg` source modifiers and `bitop3:`, VOPD's second fixed literal
//! (`v_dual_fmamk_f32 ... :: v_dual_fmaak_f32 ...`), VOP3 `v_bitop3_*` truth tables, lane-permute
//! `fi`/`bound_ctrl` bits and gfx1250 64-bit literals (`lit64(...)`).
//! Layout: LLVM `VOPDInstructions.td` (`VOPD3e`, `VOPD_MADKe`); printing: LLVM
//! `AMDGPUInstPrinter::printOperandAndFPInputMods`, `printBitOp3`, `printLiteral64`.
use crate::decode::Instruction;
use crate::Format;

impl Instruction {
    /// Source operand text with the modifiers of this module's encodings (field value `v`).
    pub(super) fn vopx_src_text(&self, name: &str, v: u32, text: String) -> String {
        match self.fmt.format {
            Format::Vopd3 => self.vopd3_src_text(name, text),
            Format::Vinterp => self.vinterp_src_text(name, v, text),
            _ => text,
        }
    }

    /// VOPD3 source with its `neg` modifier (dword 1 bits 9..=14 for srcX0, vsrcX1, vsrcX2,
    /// srcY0, vsrcY1, vsrcY2; `VOPD3e`). LLVM prints a negated register as `-v1`, a negated
    /// immediate as `neg(0.5)` / `neg(0x1234)`, and keeps `-lit(...)` for a literal it wraps.
    fn vopd3_src_text(&self, name: &str, text: String) -> String {
        let bit = match name {
            "srcx0" => 9,
            "vsrcx1" => 10,
            "vsrcx2" => 11,
            "srcy0" => 12,
            "vsrcy1" => 13,
            "vsrcy2" => 14,
            _ => return text,
        };
        if self.word(1) & (1 << bit) == 0 {
            return text;
        }
        // 9-bit sources: 128..=208 inline integers, 240..=248 inline floats, 254/255 literals
        // are immediates; everything else names a register (SIDefines.h operand encoding).
        let imm = matches!(name, "srcx0" | "srcy0")
            && self
                .field(name)
                .is_some_and(|v| matches!(v, 128..=208 | 240..=248 | 254 | 255));
        if imm && !text.starts_with("lit") {
            format!("neg({text})")
        } else {
            format!("-{text}")
        }
    }

    /// VINTERP source (LLVM `VINTERPe_gfx11`): `neg` in dword 1 bits 29..=31; in real-true16
    /// mode a 16-bit source is the VGPR of the field's low 8 bits (LLVM decodes `VGPR_16` that
    /// way) and its half is op_sel (dword 0 bits 11..=13; bit 14 for vdst).
    fn vinterp_src_text(&self, name: &str, v: u32, text: String) -> String {
        let i = match name {
            "src0" => 0,
            "src1" => 1,
            "src2" => 2,
            "vdst" => 3,
            _ => return text,
        };
        let half = text.ends_with(".l") || text.ends_with(".h");
        let t = if half || self.src_is_16bit(name) {
            let h = if self.word(0) & (1 << (11 + i)) != 0 {
                'h'
            } else {
                'l'
            };
            format!("v{}.{h}", v & 0xff)
        } else {
            text
        };
        if i < 3 && self.word(1) & (1 << (29 + i)) != 0 {
            format!("-{t}")
        } else {
            t
        }
    }

    /// Width in dwords the opcode table gives the operand of field `name` (0 = 16 bits, a
    /// true16 `VGPR_16`).
    pub(super) fn src_width_of(&self, name: &str) -> Option<u8> {
        self.operand_of(name).map(|(_, o)| o.width)
    }

    /// Is the operand of field `name` a true16 16-bit register?
    pub(super) fn src_is_16bit(&self, name: &str) -> bool {
        self.target.true16() && self.src_width_of(name) == Some(0)
    }

    /// `attrN.c` of VINTRP/LDSDIR: attribute in bits 10..=15, channel in bits 8..=9 of dword 0.
    fn attr_text(&self) -> String {
        let w = self.word(0);
        let chan = ["x", "y", "z", "w"][((w >> 8) & 3) as usize];
        format!("attr{}.{chan}", (w >> 10) & 0x3f)
    }

    /// VOP3 `v_bitop3_b16`/`v_bitop3_b32` (gfx950, gfx1250): the abs/omod/neg bits hold the
    /// 8-bit truth table instead of source modifiers.
    pub(super) fn is_bitop3(&self) -> bool {
        self.fmt.format == Format::Vop3 && self.row.mnemonic.starts_with("v_bitop3_")
    }

    /// Fix-ups after the template is filled in: VOPD/VOPD3 literals and `bitop3`, and
    /// lane-permute `fi`/`bound_ctrl` bits (VOP3 `v_bitop3_*` truth tables: display/vop3.rs).
    pub(super) fn fix_vopx(&self, out: &mut String) {
        match self.fmt.format {
            // VOP3 op_sel bits 11 and 12 (dword 0) are `fi` and `bound_ctrl` of the lane
            // permutes: v_permlane{,x}16{,_var}_b32 print them as `op_sel:[fi,bound_ctrl]`,
            // v_permlane{16,32}_swap_b32_e64 as `bound_ctrl:1 fi:1` (LLVM `VOP3Instructions.td`
            // permlane profiles; checked with llvm-mc-22 bit flips).
            Format::Vop3 if self.row.mnemonic.starts_with("v_permlane") => {
                let (fi, bc) = (self.word(0) >> 11 & 1, self.word(0) >> 12 & 1);
                let m = self.row.mnemonic;
                if m.contains("_swap_") {
                    if bc != 0 {
                        out.push_str(" bound_ctrl:1");
                    }
                    if fi != 0 {
                        out.push_str(" fi:1");
                    }
                } else if m.contains("16_") && (fi | bc) != 0 {
                    out.push_str(&format!(" op_sel:[{fi},{bc}]"));
                }
            }
            // gfx1250 v_fmamk_f64/v_fmaak_f64: the fixed 64-bit literal, shown `lit64(0x0)` by
            // the template.
            Format::Vop2 if out.contains("lit64(0x0)") => {
                if let Some(l) = self.literal64() {
                    *out = out.replace("lit64(0x0)", &self.lit64_text(l, 2));
                }
            }
            // `v_dual_fmamk_f32 ... :: v_dual_fmaak_f32 ...`: both halves print the one
            // literal (`VOPD_MADKe` Inst{95-64}); the template shows it as 0x0.
            Format::Vopd => {
                if let Some(l) = self.literal() {
                    *out = out.replace(", 0x0", &format!(", {:#x}", l as u32));
                }
            }
            // VOPD3 `v_dual_bitop2_b32`: dword 2 bits 16..=23 hold `bitop3` instead of vsrcY2,
            // printed as `bitop3:0x..` when non-zero.
            Format::Vopd3 if self.mnemonic_y() == Some("v_dual_bitop2_b32") => {
                if let Some(p) = out.find(" bitop3:") {
                    let end = out[p + 1..].find(' ').map_or(out.len(), |e| p + 1 + e);
                    out.replace_range(p..end, "");
                }
                let b = (self.word(2) >> 16) & 0xff;
                if b != 0 {
                    out.push_str(&format!(" bitop3:{b:#x}"));
                }
            }
            // VINTERP: clamp (dword 0 bit 15), op_sel (bits 11..=14, f16 forms only) and
            // wait_exp (bits 8..=10), in LLVM's order.
            Format::Vinterp => {
                let w = self.word(0);
                if let Some(p) = out.rfind(" wait_exp:") {
                    out.truncate(p);
                }
                if w & (1 << 15) != 0 {
                    out.push_str(" clamp");
                }
                let os = (w >> 11) & 0xf;
                if os != 0 && self.row.mnemonic.contains("_f16") {
                    let b = |i: u32| (os >> i) & 1;
                    out.push_str(&format!(" op_sel:[{},{},{},{}]", b(0), b(1), b(2), b(3)));
                }
                out.push_str(&format!(" wait_exp:{}", (w >> 8) & 7));
            }
            // VINTRP (gfx9/gfx10): attribute/channel; v_interp_mov_f32's source is a parameter
            // (0 p10, 1 p20, 2 p0; LLVM `AMDGPUInstPrinter::printInterpSlot`).
            Format::Vintrp => {
                *out = out.replace("attr0.x", &self.attr_text());
                if let Some(p) = out.find("invalid_param_8") {
                    let slot = match self.word(0) & 0xff {
                        0 => "p10".to_string(),
                        1 => "p20".to_string(),
                        2 => "p0".to_string(),
                        n => format!("invalid_param_{n}"),
                    };
                    out.replace_range(p..p + "invalid_param_8".len(), &slot);
                }
            }
            // LDSDIR (gfx11 `LDSDIRe`: wait_vdst bits 16..=19) / VDSDIR (gfx12: wait_va_vdst
            // bits 16..=19, wait_vm_vsrc bit 23).
            Format::Ldsdir => {
                let w = self.word(0);
                *out = out.replace("attr0.x", &self.attr_text());
                if let Some(p) = out.find(" wait_") {
                    out.truncate(p);
                }
                if self.target.family() == crate::Family::Gfx11 {
                    out.push_str(&format!(" wait_vdst:{}", (w >> 16) & 0xf));
                } else {
                    out.push_str(&format!(
                        " wait_va_vdst:{} wait_vm_vsrc:{}",
                        (w >> 16) & 0xf,
                        (w >> 23) & 1
                    ));
                }
            }
            _ => {}
        }
    }
}

/// Inline constants of the floating-point operand encodings 240..=247 (0.5, -0.5, 1.0, -1.0,
/// 2.0, -2.0, 4.0, -4.0) as f32 and f64 bit patterns (ISA manuals, "Inline constants").
const INLINE_FLOATS: [(u32, u64, &str); 8] = [
    (0x3f00_0000, 0x3fe0_0000_0000_0000, "0.5"),
    (0xbf00_0000, 0xbfe0_0000_0000_0000, "-0.5"),
    (0x3f80_0000, 0x3ff0_0000_0000_0000, "1.0"),
    (0xbf80_0000, 0xbff0_0000_0000_0000, "-1.0"),
    (0x4000_0000, 0x4000_0000_0000_0000, "2.0"),
    (0xc000_0000, 0xc000_0000_0000_0000, "-2.0"),
    (0x4080_0000, 0x4010_0000_0000_0000, "4.0"),
    (0xc080_0000, 0xc010_0000_0000_0000, "-4.0"),
];

impl Instruction {
    /// gfx1250 64-bit literal (operand encoding 254) of an operand `width` dwords wide, as
    /// llvm-mc-22 prints it: a value that fits 32 unsigned bits keeps its encoding visible as
    /// `lit64(0x..)`; otherwise a 32-bit operand sees the low 32 bits and a 64-bit operand the
    /// whole value, shown as an inline constant when it is one (checked against llvm-mc-22:
    /// `s_mov_b64 s[0:1], -1`, `v_mov_b64 v[0:1], 4.0`, `v_mov_b32 v0, 1.0`).
    pub(super) fn lit64_text(&self, l: u64, width: u32) -> String {
        let l = self.literal64().unwrap_or(l);
        if l <= u64::from(u32::MAX) {
            return format!("lit64({l:#x})");
        }
        let float = self.float_op();
        if width >= 2 {
            if (-16..=64).contains(&(l as i64)) {
                return (l as i64).to_string();
            }
            if let Some(f) = INLINE_FLOATS.iter().find(|f| float && f.1 == l) {
                return f.2.to_string();
            }
            return format!("{l:#x}");
        }
        let lo = l as u32;
        if (-16..=64).contains(&(lo as i32)) {
            return (lo as i32).to_string();
        }
        match INLINE_FLOATS.iter().find(|f| float && f.0 == lo) {
            Some(f) => f.2.to_string(),
            None => format!("{lo:#x}"),
        }
    }
}

impl Instruction {
    /// The 8 literal bytes after the nominal encoding when an operand is 254 (VOPD with a
    /// 32-bit X literal and a 64-bit Y literal shares one 64-bit literal; `literal()` reports
    /// the first probe's 4 bytes).
    fn literal64(&self) -> Option<u64> {
        let (off, _) = self.lit?;
        let o = usize::from(off);
        let b = self.bytes().get(o..o + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }
}

/// Half-precision bit patterns of the inline constants 240..=248 (0.5, -0.5, 1.0, -1.0, 2.0,
/// -2.0, 4.0, -4.0, 1/(2*pi)), which LLVM prints for 16-bit integer operands.
const INLINE_F16_BITS: [u16; 9] = [
    0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118,
];

impl Instruction {
    /// Is src0 of this 32-bit VOP1/VOP2/VOPC encoding a 16-bit operand, and is it a float?
    /// From the mnemonic's source type (last type suffix); packed and dot forms take 32 bits.
    /// Checked against llvm-mc-22: `v_cvt_f16_i16 v1, 0x4400` (i16), `v_ldexp_f16 v1, 4.0, v2`
    /// (f16), `v_sat_pk_u8_i16 v1, 0x12345678` and bf16 sources print all 32 bits.
    fn src0_16bit(&self) -> Option<bool> {
        if !matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc) {
            return None;
        }
        let m = self.row.mnemonic.trim_end_matches("_e32");
        let fp8 = m.ends_with("_fp8") || m.ends_with("_bf8");
        // gfx12+ (gfx942 takes a 32-bit source).
        if m.starts_with("v_cvt_pk_f32_") && fp8 && self.target.family() >= crate::Family::Gfx12 {
            return Some(true);
        }
        if m.starts_with("v_cvt_pk_f16_") && fp8 {
            return Some(false);
        }
        if m.contains("_pk_") || m.contains("dot2") {
            return None;
        }
        match m.rsplit('_').next() {
            Some("f16") => Some(true),
            Some("i16" | "u16" | "b16") => Some(false),
            _ => None,
        }
    }

    /// Text of a 16-bit src0 constant: a literal shows its low 16 bits; on integer operands the
    /// float inline constants show their half-precision bit patterns (LLVM
    /// `AMDGPUInstPrinter::printImmediate16`/`printImmediateInt16`). `None` when the generic
    /// rendering applies.
    pub(super) fn src16_text(&self, name: &str, v: u32) -> Option<String> {
        if name != "src0" {
            return None;
        }
        // 1/(2*pi) on a 64-bit operand prints at double precision (`printImmediate64`).
        let e32 = matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc);
        if e32 && v == 248 && self.src_width_of(name) == Some(2) {
            return Some("0.15915494309189532".to_string());
        }
        let float = self.src0_16bit()?;
        match v {
            // A literal whose low half would be an inline constant keeps `lit(...)` of all
            // 32 bits on gfx10+ (llvm-mc-22: `v_rndne_f16 v127, lit(0x13c00)`).
            255 => self.literal().map(|l| {
                let lo = l as u16;
                let inline = (-16..=64).contains(&(lo as i16)) || INLINE_F16_BITS.contains(&lo);
                if inline && self.target.family() >= crate::Family::Gfx10 {
                    format!("lit({:#x})", l as u32)
                } else {
                    format!("{lo:#x}")
                }
            }),
            // gfx1250 64-bit literal with high bits set: the operand sees the low 16 bits.
            254 => self
                .literal64()
                .filter(|&l| l > u64::from(u32::MAX))
                .map(|l| format!("{:#x}", l as u16)),
            240..=248 if !float => INLINE_F16_BITS
                .get((v - 240) as usize)
                .map(|b| format!("{b:#x}")),
            _ => None,
        }
    }
}
