//! VOP3/VOP3P source and trailing modifiers (`-|x|`, `neg(5)`, `op_sel:[..]`, `op_sel_hi:[..]`,
//! `neg_lo:[..]`, `neg_hi:[..]`, `clamp`, `mul:2`/`mul:4`/`div:2`), rendered from the per-opcode
//! facts of the `mods` table column (`OpRow::mods`, probed from LLVM 22 by
//! `tools/isa-gen/isa-dump.cpp`), following LLVM's `AMDGPUInstPrinter`
//! (`printOperandAndFPInputMods`, `printPackedModifier`, `printClampSI`, `printOModSI`).
use crate::decode::Instruction;
use crate::tables::{ListKind, Mod};
use crate::{Family, Format};
use std::fmt::Write as _;

/// Encoding bits (dword, bit) of a list modifier, in slot-mapping order (ISA manuals, VOP3 and
/// VOP3P microcode formats: OPSEL dword0 11..=14, OPSEL_HI dword1 27..=28 + dword0 14, NEG
/// dword1 29..=31, NEG_HI dword0 8..=10).
fn list_bits(kind: ListKind) -> &'static [(usize, u32)] {
    match kind {
        ListKind::OpSel => &[(0, 11), (0, 12), (0, 13), (0, 14)],
        ListKind::OpSelHi => &[(1, 27), (1, 28), (0, 14)],
        ListKind::NegLo => &[(1, 29), (1, 30), (1, 31)],
        ListKind::NegHi => &[(0, 8), (0, 9), (0, 10)],
    }
}

fn list_name(kind: ListKind) -> &'static str {
    match kind {
        ListKind::OpSel => "op_sel",
        ListKind::OpSelHi => "op_sel_hi",
        ListKind::NegLo => "neg_lo",
        ListKind::NegHi => "neg_hi",
    }
}

impl Instruction {
    /// Source `i` (0..=2) text with its abs/neg modifiers, where the opcode's facts say LLVM
    /// prints them. A negated constant without abs prints `neg(c)` (LLVM: `-1` is not `neg(1)`).
    pub(super) fn vop3_src_mods(&self, i: u32, text: String) -> String {
        let mask = |abs: bool| {
            self.row.mods.iter().any(|m| match *m {
                Mod::Abs(b) if abs => b & (1 << i) != 0,
                Mod::Neg(b) if !abs => b & (1 << i) != 0,
                _ => false,
            })
        };
        let text = self.vop3_src_const(i, text);
        let abs = mask(true) && self.word(0) & (1 << (8 + i)) != 0;
        let neg = mask(false) && self.word(1) & (1 << (29 + i)) != 0;
        let t = if abs { format!("|{text}|") } else { text };
        if !neg {
            t
        } else if !abs && self.src_is_constant(i) {
            format!("neg({t})")
        } else {
            format!("-{t}")
        }
    }

    /// Source `i` (0..=2) text of a literal or inline constant as LLVM prints it for the
    /// operand's type (16-bit literals, gfx1250 64-bit literals, f16 inline constants of
    /// 16-bit integer operands); other operands unchanged.
    pub(super) fn vop3_src_const(&self, i: u32, text: String) -> String {
        let bit = |b: u8| b & (1 << i) != 0;
        let lit16 = self.has_mod(|m| matches!(m, Mod::Lit16(b) if bit(b)));
        let fpc16 = self.has_mod(|m| matches!(m, Mod::Fpc16(b) if bit(b)));
        // Source 254 is a 64-bit literal on gfx1250 (`src_lds_direct` before).
        let lit64 = self.target.family() == Family::Gfx1250;
        match (self.src_field(i), self.literal()) {
            // LLVM printImmediateInt16/printImmediate16: a literal of a 16-bit operand prints
            // its low half, decimal when that is an inline integer.
            (Some(v @ (254 | 255)), Some(l)) if lit16 && (v == 255 || lit64) => {
                let h = l as u16;
                if (-16..=64).contains(&(h as i16)) {
                    (h as i16).to_string()
                } else {
                    format!("{h:#x}")
                }
            }
            // gfx1250 64-bit literal (source 254) of a 32-bit operand: the low dword.
            (Some(254), Some(l)) if lit64 && self.src_width(i) < 2 => format!("{:#x}", l as u32),
            // Inline float constants of 16-bit integer operands: their f16 bit patterns.
            (Some(v @ 240..=248), _) if fpc16 => {
                const F16: [u16; 9] = [
                    0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118,
                ];
                format!("{:#x}", F16[(v - 240) as usize])
            }
            _ => text,
        }
    }

    fn src_field(&self, i: u32) -> Option<u32> {
        self.field(["src0", "src1", "src2"][i as usize % 3])
    }

    fn has_mod(&self, f: impl Fn(Mod) -> bool) -> bool {
        self.row.mods.iter().any(|&m| f(m))
    }

    /// Is source `i` an inline constant or literal (9-bit source 128..=208, 240..=248, 255, and
    /// the gfx1250 64-bit literal 254; ISA manuals, "Scalar/vector operand encodings")?
    fn src_is_constant(&self, i: u32) -> bool {
        let lit64 = self.target.family() == Family::Gfx1250;
        self.src_field(i)
            .is_some_and(|v| matches!(v, 128..=208 | 240..=248 | 255) || (v == 254 && lit64))
    }

    /// gfx11+ real-true16 VOP3 word with an `op_sel` bit set that the true16 encoding fixes
    /// to 0 (bits of operands the opcode lacks): LLVM decodes the fake16 opcode instead (32-bit
    /// VGPR names, no `op_sel`; AMDGPUDisassembler tries the fake16 table next).
    pub(super) fn vop3_fake16(&self) -> bool {
        let op_sel = (self.word(0) >> 11) & 0xf;
        self.target.true16()
            && self.has_mod(|m| matches!(m, Mod::Fake16(b) if u32::from(b) & op_sel != 0))
    }

    /// Register width in dwords of source `i` (1 when unknown).
    fn src_width(&self, i: u32) -> u8 {
        let name = ["src0", "src1", "src2"][i as usize % 3];
        self.operand_of(name).map_or(1, |(_, o)| o.width)
    }

    /// Replaces the modifier tokens of the template text with the ones this word encodes, in
    /// LLVM's print order.
    pub(super) fn vop3_trailing_mods(&self, out: &mut String) {
        if self.row.mods.is_empty() {
            return;
        }
        let is_mod = |t: &str| {
            [
                "op_sel:[",
                "op_sel_hi:[",
                "neg_lo:[",
                "neg_hi:[",
                "mul:",
                "div:",
            ]
            .iter()
            .any(|p| t.starts_with(p))
                || t == "clamp"
        };
        // Tokens after the operand list (the first token not following a comma).
        let mut kept: Vec<&str> = Vec::new();
        let mut at = None;
        let mut prev_comma = true;
        for (n, tok) in out.split(' ').enumerate() {
            let trailing = n > 0 && !prev_comma;
            prev_comma = tok.ends_with(',');
            if trailing && is_mod(tok) {
                at.get_or_insert(kept.len());
                continue;
            }
            kept.push(tok);
        }
        let w = [self.word(0), self.word(1)];
        let mut mods = Vec::new();
        for m in self.row.mods {
            match *m {
                Mod::Clamp if w[0] & (1 << 15) != 0 => mods.push("clamp".to_string()),
                Mod::Omod => match (w[1] >> 27) & 3 {
                    1 => mods.push("mul:2".into()),
                    2 => mods.push("mul:4".into()),
                    3 => mods.push("div:2".into()),
                    _ => {}
                },
                Mod::Cbsz | Mod::Abid | Mod::Blgp => {
                    let (name, v) = match *m {
                        Mod::Cbsz => ("cbsz", (w[0] >> 8) & 7),
                        Mod::Abid => ("abid", (w[0] >> 11) & 0xf),
                        _ => ("blgp", w[1] >> 29),
                    };
                    if v != 0 {
                        mods.push(format!("{name}:{v}"));
                    }
                }
                Mod::BitOp3 => {
                    let v = (w[1] >> 29) | ((w[0] >> 8) & 7) << 3 | ((w[1] >> 27) & 3) << 6;
                    match v {
                        0 => {}
                        // LLVM printBitOp3: decimal up to 10, else hex.
                        1..=10 => mods.push(format!("bitop3:{v}")),
                        _ => mods.push(format!("bitop3:{v:#x}")),
                    }
                }
                Mod::List(ListKind::OpSel, ..) if self.vop3_fake16() => {}
                Mod::List(kind, n, slots, def) => {
                    let mut vals = vec![def; usize::from(n)];
                    for (&(dw, bit), &slot) in list_bits(kind).iter().zip(slots.iter()) {
                        if let Some(v) = vals.get_mut(usize::from(slot)) {
                            *v = ((w[dw] >> bit) & 1) as u8;
                        }
                    }
                    if vals.iter().any(|&v| v != def) {
                        let l: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
                        mods.push(format!("{}:[{}]", list_name(kind), l.join(",")));
                    }
                }
                _ => {}
            }
        }
        let at = at.unwrap_or(kept.len());
        let mut res: Vec<&str> = kept[..at].to_vec();
        res.extend(mods.iter().map(String::as_str));
        res.extend_from_slice(&kept[at..]);
        *out = res.join(" ");
    }
}

impl Instruction {
    /// gfx11+ VOP3/VOP3P DPP forms (src0 = 250: DPP16, 233/234: DPP8; ISA manuals, "VOP3 DPP"
    /// microcode formats): the `_e64_dpp` mnemonic (LLVM `printVOPDst`), the real src0 from
    /// dword 2 bits 7:0 and the DPP controls after the VOP3 modifiers.
    pub(super) fn vop3_dpp(&self, out: &mut String) {
        if !matches!(self.fmt.format, Format::Vop3 | Format::Vop3p)
            || self.target.family() < Family::Gfx11
        {
            return;
        }
        let src0 = self.field("src0");
        if !matches!(src0, Some(250 | 233 | 234)) {
            return;
        }
        let Some(p) = out.find("<invalid>") else {
            return;
        };
        let w2 = self.word(2);
        let mut src = format!("v{}", w2 & 0xff);
        // true16: a 16-bit src0 names a half, selected by op_sel bit 11.
        if self.target.true16() && self.src_width(0) == 0 && !self.vop3_fake16() {
            src.push_str(if self.word(0) & (1 << 11) != 0 {
                ".h"
            } else {
                ".l"
            });
        }
        out.replace_range(p..p + "<invalid>".len(), &src);
        let mn_end = out.find(' ').unwrap_or(out.len());
        let base = out[..mn_end].trim_end_matches("_e64").to_string();
        out.replace_range(..mn_end, &format!("{base}_e64_dpp"));
        if src0 == Some(250) {
            let _ = write!(
                out,
                " {} row_mask:{:#x} bank_mask:{:#x}",
                self.dpp_ctrl_text((w2 >> 8) & 0x1ff),
                w2 >> 28,
                (w2 >> 24) & 0xf
            );
            if w2 & (1 << 19) != 0 {
                out.push_str(" bound_ctrl:1");
            }
            if w2 & (1 << 18) != 0 {
                out.push_str(" fi:1");
            }
        } else {
            let sel: Vec<String> = (0..8)
                .map(|i| ((w2 >> (8 + 3 * i)) & 7).to_string())
                .collect();
            let _ = write!(out, " dpp8:[{}]", sel.join(","));
            if src0 == Some(234) {
                out.push_str(" fi:1");
            }
        }
    }
}
