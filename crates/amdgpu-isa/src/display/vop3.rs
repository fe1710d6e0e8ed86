//! VOP3/VOP3P source and trailing modifiers (`-|x|`, `neg(5)`, `op_sel:[..]`, `op_sel_hi:[..]`,
//! `neg_lo:[..]`, `neg_hi:[..]`, `clamp`, `mul:2`/`mul:4`/`div:2`), rendered from the per-opcode
//! facts of the `mods` table column (`OpRow::mods`, probed from LLVM 22 by
//! `tools/isa-gen/isa-dump.cpp`), following LLVM's `AMDGPUInstPrinter`
//! (`printOperandAndFPInputMods`, `printPackedModifier`, `printClampSI`, `printOModSI`).
use crate::decode::Instruction;
use crate::tables::{ListKind, Mod};

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

    /// Is source `i` an inline constant or literal (9-bit source 128..=208, 240..=248, 255;
    /// ISA manuals, "Scalar/vector operand encodings")?
    fn src_is_constant(&self, i: u32) -> bool {
        let name = ["src0", "src1", "src2"][i as usize % 3];
        self.field(name)
            .is_some_and(|v| matches!(v, 128..=208 | 240..=248 | 255))
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
