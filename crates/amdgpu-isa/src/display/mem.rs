//! Text of FLAT/GLOBAL/SCRATCH, MUBUF/MTBUF/VBUFFER and EXP instructions, following LLVM's
//! `AMDGPUInstPrinter` (`printOperand`, `printOffset`, `printCPol`, `printSymbolicFormat`,
//! `printExpTgt`, `printExpSrcN`, `printExpCompr`, `printExpVM`) and the operand lists of
//! `FLATInstructions.td`/`BUFInstructions.td`. The operand order comes from the opcode table's
//! template; which address operands exist and the data width come from
//! [`Instruction::mem_shape`] (decode/mem.rs), the modifiers are rendered here.
use super::range;
use crate::decode::{Instruction, MemShape};
use crate::{Family, Format};

impl Instruction {
    /// Full text of a FLAT-family, buffer or export instruction; `None` for other formats.
    pub(super) fn mem_text(&self) -> Option<String> {
        match self.fmt.format {
            Format::Flat | Format::Mubuf | Format::Mtbuf | Format::Vbuffer => self.vmem_text(),
            Format::Exp => Some(self.exp_text()),
            _ => None,
        }
    }

    /// A data VGPR/AGPR tuple of `w` dwords starting at field `name`.
    fn data_text(&self, name: &str, w: u8) -> Option<String> {
        let v = self.field(name)?;
        Some(range(
            if self.acc_data() { "a" } else { "v" },
            v,
            u32::from(w),
        ))
    }

    /// One operand token of the template (`{field}` or literal text such as `off`).
    fn vmem_operand(&self, tok: &str, s: &MemShape) -> Option<Option<String>> {
        let flat = self.fmt.format == Format::Flat;
        let vaddr_field = if flat { "addr" } else { "vaddr" };
        let Some(name) = tok.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else {
            // The literal `off` of the template is the address VGPR slot (SCRATCH without SVE,
            // buffers without offen/idxen).
            if tok == "off" {
                if let (Some(w), Some(v)) = (s.vaddr, self.field(vaddr_field)) {
                    return Some(Some(range("v", v, u32::from(w))));
                }
            }
            return Some(Some(tok.to_string()));
        };
        let op_width = self.operand_of(name).map_or(1, |(_, o)| o.width.max(1));
        match name {
            "addr" if flat => Some(Some(match (s.vaddr, self.field("addr")) {
                (Some(w), Some(v)) => range("v", v, u32::from(w)),
                _ => "off".to_string(),
            })),
            "saddr" => match (s.saddr, self.field("saddr")) {
                (Some(w), Some(v)) => Some(Some(self.scalar_text(v, u32::from(w)))),
                // flat_* (gfx1250) prints nothing for an absent scalar base, the others `off`.
                _ if self.mnemonic().starts_with("flat_") => Some(None),
                _ => Some(Some("off".to_string())),
            },
            "vdst" | "vdata" => match self.mem_operand_width(s, name, op_width) {
                None => Some(None),
                Some(w) if w != op_width => Some(Some(self.data_text(name, w)?)),
                Some(_) => Some(Some(self.field_text(name)?)),
            },
            _ => Some(Some(self.field_text(name)?)),
        }
    }

    /// FLAT/GLOBAL/SCRATCH and MUBUF/MTBUF/VBUFFER text.
    fn vmem_text(&self) -> Option<String> {
        let s = self.mem_shape()?;
        let tpl = if self.row.asm.is_empty() {
            self.row.mnemonic
        } else {
            self.row.asm
        };
        let (mn, rest) = tpl.split_once(' ').unwrap_or((tpl, ""));
        let mut ops: Vec<String> = Vec::new();
        // A returning FLAT-family atomic: LLVM's returning opcode has a leading `vdst`.
        if self.flat_atomic_returns() && !tpl.contains("{vdst}") {
            ops.push(self.data_text("vdst", self.flat_atomic_vdst_width())?);
        }
        // The operand list is the leading comma-separated tokens; template modifiers
        // (`format:` of MTBUF) are re-rendered below from the encoding.
        for t in rest.split(' ').filter(|t| !t.is_empty()) {
            let (tok, more) = match t.strip_suffix(',') {
                Some(x) => (x, true),
                None => (t, false),
            };
            if let Some(text) = self.vmem_operand(tok, &s)? {
                ops.push(text);
            }
            if !more {
                break;
            }
        }
        let mut out = mn.to_string();
        if !ops.is_empty() {
            out.push(' ');
            out.push_str(&ops.join(", "));
        }
        let fam = self.target.family();
        // Cache-control opcodes without operands (`buffer_gl0_inv`, `buffer_wbinvl1`): only a
        // cache policy, where the target has one.
        if ops.is_empty() {
            out.push_str(&self.cache_policy_text());
            return Some(out);
        }
        if self.mnemonic().starts_with("tbuffer") {
            // MTBUF gfx9/gfx10/gfx11 dword0 bits 25:19, VBUFFER dword1 bits 29:23.
            let f = match self.fmt.format {
                Format::Mtbuf => (self.word(0) >> 19) & 0x7f,
                _ => (self.word(1) >> 23) & 0x7f,
            };
            let t = self.target.def().sym.mtbuf[f as usize];
            if !t.is_empty() {
                out.push(' ');
                out.push_str(t);
            }
        }
        if self.fmt.format != Format::Flat {
            let (offen, idxen) = self.buffer_addr_mode();
            out.push_str(match (idxen, offen) {
                (true, true) => " idxen offen",
                (true, false) => " idxen",
                (false, true) => " offen",
                _ => "",
            });
        }
        let off = self.mem_offset();
        if off != 0 {
            out.push_str(&format!(" offset:{off}"));
        }
        // gfx12+ VFLAT dword1 bit 16 `scale_offset`, dword0 bit 7 `nv` (LLVM 22 prints both
        // for gfx12 too).
        let gfx12 = fam >= Family::Gfx12;
        if gfx12 && self.fmt.format == Format::Flat && self.word(1) & (1 << 16) != 0 {
            out.push_str(" scale_offset");
        }
        out.push_str(&self.cache_policy_text());
        if gfx12 && self.word(0) & (1 << 7) != 0 {
            out.push_str(" nv");
        }
        if s.lds {
            out.push_str(" lds");
        }
        if s.tfe {
            out.push_str(" tfe");
        }
        Some(out)
    }

    /// `exp`/`export` (ISA manuals "EXP" microcode format: en 3:0, target 9:4, compr 10,
    /// done 11, vm 12 on gfx9/gfx10, row_en 13 on gfx11+; LLVM `printExpTgt`, `printExpSrcN`).
    fn exp_text(&self) -> String {
        let w0 = self.word(0);
        let fam = self.target.family();
        let old = fam <= Family::Gfx10;
        let (en, tgt) = (w0 & 0xf, (w0 >> 4) & 0x3f);
        let compr = old && w0 & (1 << 10) != 0;
        let target = match tgt {
            0..=7 => format!("mrt{tgt}"),
            8 => "mrtz".to_string(),
            9 if old => "null".to_string(),
            12..=15 => format!("pos{}", tgt - 12),
            16 if fam >= Family::Gfx10 => "pos4".to_string(),
            20 if fam >= Family::Gfx10 => "prim".to_string(),
            21 | 22 if fam >= Family::Gfx11 => format!("dual_src_blend{}", tgt - 21),
            32..=63 if old => format!("param{}", tgt - 32),
            _ => format!("invalid_target_{tgt}"),
        };
        // Compressed exports take two registers, each printed for two enable bits.
        let srcs: Vec<String> = (0..4)
            .map(|i| {
                let field = match (compr, i) {
                    (true, 0 | 1) => "vsrc0",
                    (true, _) => "vsrc1",
                    (_, 0) => "vsrc0",
                    (_, 1) => "vsrc1",
                    (_, 2) => "vsrc2",
                    _ => "vsrc3",
                };
                match self.field(field) {
                    Some(v) if en & (1 << i) != 0 => format!("v{v}"),
                    _ => "off".to_string(),
                }
            })
            .collect();
        let mut out = format!("{} {target} {}", self.mnemonic(), srcs.join(", "));
        if w0 & (1 << 11) != 0 {
            out.push_str(" done");
        }
        if compr {
            out.push_str(" compr");
        }
        if old && w0 & (1 << 12) != 0 {
            out.push_str(" vm");
        }
        if !old && w0 & (1 << 13) != 0 {
            out.push_str(" row_en");
        }
        out
    }
}
