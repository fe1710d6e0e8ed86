//! Text of the scalar encodings (SMEM, SOPP/SOPK/SOPC/SOP1/SOP2 operand details) following
//! LLVM's `AMDGPUInstPrinter` as observed with llvm-mc-22.
use super::imm_text;
use crate::decode::Instruction;
use crate::Family;

/// A signed byte offset as LLVM prints SMEM offsets: `0x10`, `-0x10`.
fn signed_hex(v: i64) -> String {
    if v < 0 {
        format!("-{:#x}", v.unsigned_abs())
    } else {
        format!("{v:#x}")
    }
}

impl Instruction {
    /// Full text of an SMEM instruction with an address (`sbase` or PC-relative), `None` for
    /// the others (`s_dcache_inv`, `s_memtime`: the template text is complete).
    ///
    /// Offset forms (ISA manuals, "SMEM" microcode format; LLVM `SMInstructions.td` `_IMM`,
    /// `_SGPR`, `_SGPR_IMM` variants): gfx9 selects them with `imm` (dword0 bit 17) and `soe`
    /// (bit 14); gfx10+ with `soffset` (dword1 bits 31:25) being `null` or not. An SGPR with
    /// an immediate prints `sN offset:0x..`; gfx10/gfx11 omit a zero immediate after an SGPR
    /// and print `null` when both are absent, gfx12 prints `offset:0x0` and `0x0`.
    /// Cache policy: gfx9 `glc` (bit 16), gfx10 `glc` (16) `dlc` (14), gfx11 `glc` (14)
    /// `dlc` (13), gfx12 `scale_offset` (dword1 bit 24), `th` (dword0 bits 24:23), `scope`
    /// (22:21) and `nv` (20); only for the forms with a data register (loads, stores, atomics).
    pub(super) fn smem_text(&self) -> Option<String> {
        if !self.smem_addressed() {
            return None;
        }
        let fam = self.target.family();
        let m = self.mnemonic();
        let w0 = self.word(0);
        let w1 = self.word(1);
        let sdata = self.field("sdata").unwrap_or(0);
        let data = self.field_text("sdata");
        let off = self.mem_offset();
        let soff = self
            .smem_soffset()
            .map(|v| self.scalar_text(u32::from(v), 1));
        let mut out = String::from(m);
        out.push(' ');
        let sbase = self.field_text("sbase");
        // gfx12 prefetches: `sbase, offset, soffset, sdata-as-count`.
        if fam >= Family::Gfx12 && m.contains("prefetch") {
            if let Some(b) = sbase {
                out.push_str(&b);
                out.push_str(", ");
            }
            let s = soff.unwrap_or_else(|| "null".to_string());
            out.push_str(&format!("{}, {s}, {}", signed_hex(off), imm_text(sdata)));
            return Some(out);
        }
        match &data {
            Some(d) => out.push_str(d),
            // s_atc_probe*: the probe mode from the sdata field.
            None if self.row.asm.contains(" 20, ") => out.push_str(&imm_text(sdata)),
            None => {}
        }
        if let Some(b) = sbase {
            if !out.ends_with(' ') {
                out.push_str(", ");
            }
            out.push_str(&b);
        }
        out.push_str(", ");
        let imm_present = match fam {
            Family::Gfx9 => w0 & (1 << 17) != 0,
            Family::Gfx10 | Family::Gfx11 => off != 0,
            _ => true,
        };
        match (soff, imm_present) {
            (Some(s), true) => out.push_str(&format!("{s} offset:{}", signed_hex(off))),
            (Some(s), false) => out.push_str(&s),
            (None, true) => out.push_str(&signed_hex(off)),
            (None, false) => out.push_str("null"),
        }
        if data.is_none() {
            return Some(out);
        }
        let bit0 = |b: u32| w0 & (1 << b) != 0;
        match fam {
            Family::Gfx9 | Family::Gfx10 if bit0(16) => out.push_str(" glc"),
            Family::Gfx11 if bit0(14) => out.push_str(" glc"),
            _ => {}
        }
        match fam {
            Family::Gfx10 if bit0(14) => out.push_str(" dlc"),
            Family::Gfx11 if bit0(13) => out.push_str(" dlc"),
            Family::Gfx12 | Family::Gfx1250 => {
                if w1 & (1 << 24) != 0 {
                    out.push_str(" scale_offset");
                }
                out.push_str(&self.th_scope_text((w0 >> 23) & 3, (w0 >> 21) & 3));
                if bit0(20) {
                    out.push_str(" nv");
                }
            }
            _ => {}
        }
        Some(out)
    }
}

/// `gpr_idx(...)` operand of `s_set_gpr_idx_on`/`s_set_gpr_idx_mode` (gfx9; LLVM
/// `AMDGPUInstPrinter::printVGPRIndexMode`): the enabled operands for bits 3:0, hexadecimal
/// when a higher bit is set.
pub(super) fn gpr_idx_text(imm: u32) -> String {
    if imm > 0xf {
        return format!("{imm:#x}");
    }
    let on: Vec<&str> = ["SRC0", "SRC1", "SRC2", "DST"]
        .iter()
        .enumerate()
        .filter(|(i, _)| imm & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect();
    format!("gpr_idx({})", on.join(","))
}

/// `s_version` operand (LLVM 22 `AMDGPUInstPrinter::printSVersion`, `UCVersion`): version
/// number bits 7:0 by name (`UC_VERSION_GFX7/10/11/12` = 0/4/6/9) or in decimal, then the
/// W64 (bit 13), W32 (14) and MDP (15) flags as a left-nested `|` expression; hexadecimal when
/// a bit of 12:8 is set.
fn version_text(imm: u32) -> String {
    if imm & 0x1f00 != 0 {
        return imm_text(imm);
    }
    let v = imm & 0xff;
    let mut s = match v {
        0 => "UC_VERSION_GFX7".to_string(),
        4 => "UC_VERSION_GFX10".to_string(),
        6 => "UC_VERSION_GFX11".to_string(),
        9 => "UC_VERSION_GFX12".to_string(),
        _ => v.to_string(),
    };
    let mut first = true;
    for (bit, name) in [
        (13, "UC_VERSION_W64_BIT"),
        (14, "UC_VERSION_W32_BIT"),
        (15, "UC_VERSION_MDP_BIT"),
    ] {
        if imm & (1 << bit) != 0 {
            s = if first {
                format!("{s}|{name}")
            } else {
                format!("({s})|{name}")
            };
            first = false;
        }
    }
    s
}

impl Instruction {
    /// SOPK/SOPC operands whose template shows a fixed symbolic value: `s_version` and gfx9
    /// `s_set_gpr_idx_on` (its mode in ssrc1, dword0 bits 15:8).
    pub(super) fn fix_scalar_symbolic(&self, out: &mut String) {
        let m = self.mnemonic();
        let repl = match m {
            "s_version" => version_text(self.word(0) & 0xffff),
            "s_set_gpr_idx_on" => gpr_idx_text((self.word(0) >> 8) & 0xff),
            _ => return,
        };
        let at = if m == "s_version" {
            out.find(' ')
        } else {
            out.find(", ").map(|p| p + 1)
        };
        if let Some(p) = at {
            out.replace_range(p + 1.., &repl);
        }
    }
}

/// Inline floating-point constants 240..=248 as f16 bit patterns (0.5, -0.5, 1.0, -1.0, 2.0,
/// -2.0, 4.0, -4.0, 1/(2*pi); ISA manuals, "Inline constants").
const F16_INLINE: [u32; 9] = [
    0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118,
];

/// Inline floating-point constants 240..=248 as f64 bit patterns (same values as above).
const F64_INLINE: [(u64, &str); 9] = [
    (0x3fe0_0000_0000_0000, "0.5"),
    (0xbfe0_0000_0000_0000, "-0.5"),
    (0x3ff0_0000_0000_0000, "1.0"),
    (0xbff0_0000_0000_0000, "-1.0"),
    (0x4000_0000_0000_0000, "2.0"),
    (0xc000_0000_0000_0000, "-2.0"),
    (0x4010_0000_0000_0000, "4.0"),
    (0xc010_0000_0000_0000, "-4.0"),
    (0x3fc4_5f30_6dc9_c882, "0.15915494309189532"),
];

/// Inline floating-point constants as f32 bit patterns.
const F32_INLINE: [(u32, &str); 9] = [
    (0x3f00_0000, "0.5"),
    (0xbf00_0000, "-0.5"),
    (0x3f80_0000, "1.0"),
    (0xbf80_0000, "-1.0"),
    (0x4000_0000, "2.0"),
    (0xc000_0000, "-2.0"),
    (0x4080_0000, "4.0"),
    (0xc080_0000, "-4.0"),
    (0x3e22_f983, "0.15915494"),
];

/// Is `v` (sign-extended) an inline integer constant (-16..=64)?
fn inline_int(v: i64) -> bool {
    (-16..=64).contains(&v)
}

impl Instruction {
    /// gfx1250 `lit64` (encoding 254), and a 32-bit literal operand next to one, in
    /// SOP1/SOP2/SOPC/SOPK, as llvm-mc-22 prints it
    /// (`AMDGPUInstPrinter::printImmediate32/64`): a value whose high dword is 0 keeps
    /// `lit64(...)`; otherwise a 32-bit operand shows the low dword and a 64-bit operand the
    /// whole value, each as an inline constant when it is one, else hexadecimal. `None` for
    /// other operands and formats.
    pub(super) fn scalar_literal_text(&self, name: &str, width: u32) -> Option<String> {
        if !name.starts_with("lit") || !self.is_salu_format() {
            return None;
        }
        let l = self.literal()?;
        let lit64 = name.starts_with("lit64");
        // A 32-bit literal operand sharing an instruction's 64-bit literal (LLVM decodes one
        // literal per instruction) is printed like a `lit64` operand; alone it keeps the
        // generic rendering.
        if !lit64 && l >> 32 == 0 {
            return None;
        }
        if lit64 && l >> 32 == 0 {
            return Some(format!("lit64({l:#x})"));
        }
        if width >= 2 {
            if inline_int(l as i64) {
                return Some((l as i64).to_string());
            }
            if let Some((_, t)) = F64_INLINE.iter().find(|(b, _)| *b == l) {
                return Some((*t).to_string());
            }
            return Some(format!("{l:#x}"));
        }
        let lo = l as u32;
        if inline_int(i64::from(lo as i32)) {
            return Some((lo as i32).to_string());
        }
        if let Some((_, t)) = F32_INLINE.iter().find(|(b, _)| *b == lo) {
            return Some((*t).to_string());
        }
        Some(format!("{lo:#x}"))
    }

    fn is_salu_format(&self) -> bool {
        matches!(
            self.fmt.format,
            crate::Format::Sop1 | crate::Format::Sop2 | crate::Format::Sopc | crate::Format::Sopk
        )
    }

    /// A gfx12+ SOP2/SOPC `_f16` source (LLVM 22 `printImmediate16` for the SALU f16 operand
    /// types, observed with llvm-mc-22): a 32-bit literal prints its low half in hexadecimal,
    /// or `lit(...)` with the whole value when the encoding would otherwise read back as an
    /// inline constant (SOP2: low half is one; SOPC: whole value is an inline integer); SOPC
    /// prints inline float constants as their f16 bit pattern.
    fn f16_src_text(&self, field: &str) -> Option<String> {
        let v = self.field(field)?;
        let sopc = self.fmt.format == crate::Format::Sopc;
        if v == 255 {
            let l = self.literal()? as u32;
            let lo = l & 0xffff;
            let keep = if sopc {
                inline_int(i64::from(l as i32))
            } else {
                inline_int(i64::from(lo as u16 as i16)) || F16_INLINE.contains(&lo)
            };
            return Some(if keep {
                format!("lit({l:#x})")
            } else {
                format!("{lo:#x}")
            });
        }
        // gfx1250 lit64: the low half unless the high dword is 0.
        if v == 254 && self.target.family() == Family::Gfx1250 {
            let l = self.literal()?;
            return Some(if l >> 32 == 0 {
                format!("lit64({l:#x})")
            } else {
                format!("{:#x}", l & 0xffff)
            });
        }
        if sopc && (240..=248).contains(&v) {
            return Some(format!("{:#x}", F16_INLINE[(v - 240) as usize]));
        }
        self.field_text(field)
    }

    /// Re-renders gfx12+ SOP2/SOPC instructions with `_f16` sources (see [`Self::f16_src_text`]).
    pub(super) fn fix_f16_sources(&self, out: &mut String) {
        let m = self.mnemonic();
        if self.target.family() < Family::Gfx12
            || !m.ends_with("_f16")
            || !matches!(self.fmt.format, crate::Format::Sop2 | crate::Format::Sopc)
        {
            return;
        }
        let (Some(a), Some(b)) = (self.f16_src_text("ssrc0"), self.f16_src_text("ssrc1")) else {
            return;
        };
        *out = match self.field_text("sdst") {
            Some(d) if self.fmt.format == crate::Format::Sop2 => format!("{m} {d}, {a}, {b}"),
            _ => format!("{m} {a}, {b}"),
        };
    }
}
