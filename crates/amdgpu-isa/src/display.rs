//! LLVM-syntax text of instructions (goal: identical to `llvm-objdump-22 -d`).
//!
//! Each opcode row carries LLVM's text of its template decode with register fields replaced by
//! `{field}` (`isa-tables/ops/*.tsv`, column `asm`); register fields are rendered from the actual
//! encoding, then format-specific immediates (SOPP/SOPK operands, offsets, literals) are
//! re-rendered following LLVM's `AMDGPUInstPrinter`.
use crate::decode::Instruction;
use crate::tables::{FieldKind, RegFile};
use crate::{Family, Format};
use std::fmt::Write as _;

fn range(prefix: &str, lo: u32, width: u32) -> String {
    if width <= 1 {
        format!("{prefix}{lo}")
    } else {
        format!("{prefix}[{lo}:{}]", lo + width - 1)
    }
}

impl Instruction {
    /// Text of a scalar operand encoding `v` of `width` dwords.
    fn scalar_text(&self, v: u32, width: u32) -> String {
        let sregs = self.target.def().sregs;
        let name = sregs.get(v as usize).copied().unwrap_or("<invalid>");
        if let Some(n) = name
            .strip_prefix("ttmp")
            .and_then(|n| n.parse::<u32>().ok())
        {
            return range("ttmp", n, width);
        }
        if let Some(n) = name.strip_prefix('s').and_then(|n| n.parse::<u32>().ok()) {
            return range("s", n, width);
        }
        if name.starts_with("lit") {
            return match self.literal() {
                // A literal holding an inline-constant integer is shown as lit() by LLVM.
                Some(l)
                    if (l as u32 as i32) >= -16
                        && (l as u32 as i32) <= 64
                        && l <= u64::from(u32::MAX) =>
                {
                    format!("lit({l:#x})")
                }
                Some(l) => format!("{l:#x}"),
                None => name.to_string(),
            };
        }
        if width >= 2 {
            for (lo, full) in [
                ("vcc_lo", "vcc"),
                ("exec_lo", "exec"),
                ("flat_scratch_lo", "flat_scratch"),
                ("xnack_mask_lo", "xnack_mask"),
            ] {
                if name == lo {
                    return full.to_string();
                }
            }
        }
        name.to_string()
    }

    fn field_text(&self, name: &str) -> Option<String> {
        let fi = self.fmt.fields.iter().position(|f| f.name == name)?;
        let f = &self.fmt.fields[fi];
        let op = self
            .row
            .operands
            .iter()
            .find(|o| usize::from(o.field) == fi)?;
        let v = self.field(name)?;
        let mut w = u32::from(op.width.max(1));
        if name == "addr"
            && matches!(self.format(), Format::Flat | Format::Global)
            && self.saddr_off()
        {
            w = 2;
        }
        let e32 = matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc);
        let vreg = |n: u32| match (op.file, op.width) {
            (RegFile::Agpr, _) => range("a", n, w),
            // true16: in 32-bit encodings bit 7 of the VGPR number selects the high half.
            (_, 0) if self.target.true16() && e32 => {
                format!("v{}.{}", n & 0x7f, if n & 0x80 != 0 { 'h' } else { 'l' })
            }
            (_, 0) if self.target.true16() => {
                format!("v{n}.{}", if self.true16_hi(name) { 'h' } else { 'l' })
            }
            _ => range("v", n, w),
        };
        let text = match f.kind {
            FieldKind::Sx2 => range("s", v * 2, w),
            FieldKind::Sx4 => range("s", v * 4, w),
            FieldKind::V9 if v >= 256 => vreg(v - 256),
            FieldKind::V8 if op.file != RegFile::Scalar => vreg(v),
            _ if name == "saddr" && !self.scalar_text(v, 1).starts_with('s') => "off".to_string(),
            _ => self.scalar_text(v, w),
        };
        Some(self.with_src_modifiers(name, text))
    }

    /// VOP3 op_sel bit of a 16-bit operand (dword0 bits 11..=14: src0, src1, src2, dst).
    fn true16_hi(&self, name: &str) -> bool {
        let bit = match name {
            "src0" => 11,
            "src1" => 12,
            "src2" => 13,
            "vdst" => 14,
            _ => return false,
        };
        matches!(self.fmt.format, Format::Vop3) && self.word(0) & (1 << bit) != 0
    }

    /// VOP3/VOP3P source modifiers: VOP3 `neg` (dword1 bits 29..=31) and `abs` (dword0 bits
    /// 8..=10, not in VOP3b forms with an `sdst`), printed `-|x|` as LLVM does.
    fn with_src_modifiers(&self, name: &str, text: String) -> String {
        let i = match name {
            "src0" => 0,
            "src1" => 1,
            "src2" => 2,
            _ => return text,
        };
        if self.fmt.format != Format::Vop3 {
            return text;
        }
        let has_sdst = self
            .fmt
            .fields
            .iter()
            .position(|f| f.name == "sdst")
            .is_some_and(|fi| self.row.operands.iter().any(|o| usize::from(o.field) == fi));
        let neg = self.word(1) & (1 << (29 + i)) != 0;
        let abs = !has_sdst && self.word(0) & (1 << (8 + i)) != 0;
        let t = if abs { format!("|{text}|") } else { text };
        if neg {
            format!("-{t}")
        } else {
            t
        }
    }

    /// FLAT-family `saddr` is `off`/`null` (not an SGPR pair).
    fn saddr_off(&self) -> bool {
        let sregs = self.target.def().sregs;
        self.field("saddr").is_none_or(|v| {
            !sregs
                .get(v as usize)
                .is_some_and(|n| n.starts_with('s') && !n.starts_with("src"))
        })
    }

    /// Signed value of bits `hi..=lo` of dword `dw`.
    fn sbits(&self, dw: usize, hi: u32, lo: u32) -> i64 {
        let n = hi - lo + 1;
        let v = (self.word(dw) >> lo) & if n >= 32 { u32::MAX } else { (1 << n) - 1 };
        let sh = 64 - n;
        (i64::from(v) << sh) >> sh
    }

    /// Memory instruction immediate offset in bytes, sign-extended where the encoding is signed
    /// (ISA manuals, microcode formats: MUBUF/MTBUF 12-bit unsigned, VBUFFER 24-bit signed,
    /// FLAT 12/11-bit unsigned, GLOBAL/SCRATCH 13/12-bit signed on gfx9/gfx10/gfx11, 24-bit
    /// signed on gfx12; SMEM per generation). 0 for formats without one (DS offsets are in
    /// [`crate::MemAccess::ds_offsets`]).
    pub fn mem_offset(&self) -> i64 {
        let fam = self.target.family();
        match self.fmt.format {
            Format::Mubuf | Format::Mtbuf => i64::from(self.word(0) & 0xfff),
            Format::Vbuffer => self.sbits(2, 31, 8),
            Format::Flat => match fam {
                Family::Gfx9 if self.format() == Format::Flat => i64::from(self.word(0) & 0xfff),
                Family::Gfx9 | Family::Gfx11 => self.sbits(0, 12, 0),
                Family::Gfx10 if self.format() == Format::Flat => i64::from(self.word(0) & 0x7ff),
                Family::Gfx10 => self.sbits(0, 11, 0),
                _ => self.sbits(2, 31, 8),
            },
            Format::Smem => match fam {
                Family::Gfx9 => i64::from(self.word(1) & 0x1f_ffff),
                Family::Gfx10 | Family::Gfx11 => self.sbits(1, 20, 0),
                _ => self.sbits(1, 23, 0),
            },
            _ => 0,
        }
    }

    /// Depctr operand (`s_waitcnt_depctr`, `s_wait_alu`; LLVM `AMDGPU::DepCtr`): fields not at
    /// their maximum, as `depctr_<name>(n)`.
    fn depctr_text(&self, imm: u32) -> String {
        let fields: &[(&str, u32, u32)] = &[
            ("depctr_hold_cnt", 7, 1),
            ("depctr_sa_sdst", 0, 1),
            ("depctr_va_vdst", 12, 4),
            ("depctr_va_sdst", 9, 3),
            ("depctr_va_ssrc", 8, 1),
            ("depctr_va_vcc", 1, 1),
            ("depctr_vm_vsrc", 2, 3),
        ];
        let gfx12 = self.target.family() >= Family::Gfx12;
        let parts: Vec<String> = fields
            .iter()
            .filter(|f| gfx12 || f.0 != "depctr_hold_cnt")
            .filter_map(|&(n, lo, bits)| {
                let max = (1 << bits) - 1;
                let v = (imm >> lo) & max;
                (v != max).then(|| format!("{n}({v})"))
            })
            .collect();
        if parts.is_empty() {
            format!("{imm:#x}")
        } else {
            parts.join(" ")
        }
    }

    /// `glc`/`slc`/`dlc` (gfx9 non-gfx94x, gfx10, gfx11) of FLAT and MUBUF/MTBUF encodings
    /// (ISA manuals, microcode formats). gfx94x `sc0/sc1/nt` and gfx12 `th:/scope:` are not
    /// rendered yet.
    fn cache_policy_text(&self) -> String {
        let fam = self.target.family();
        let name = self.target.name();
        if fam >= Family::Gfx12
            || name.starts_with("gfx94")
            || name.starts_with("gfx95")
            || name == "gfx9-4-generic"
        {
            return String::new();
        }
        let w = self.word(0);
        let bit = |b: u32| w & (1 << b) != 0;
        let (glc, slc, dlc) = match (self.fmt.format, fam) {
            (Format::Flat, Family::Gfx9) => (bit(16), bit(17), false),
            (Format::Flat, Family::Gfx10) => (bit(16), bit(17), bit(12)),
            (Format::Flat, _) => (bit(14), bit(15), bit(13)),
            (Format::Mubuf, Family::Gfx9) => (bit(14), bit(17), false),
            (Format::Mubuf, Family::Gfx10) => (bit(14), self.word(1) & (1 << 22) != 0, bit(15)),
            (Format::Mubuf, _) => (bit(14), bit(12), bit(13)),
            _ => (false, false, false),
        };
        let mut s = String::new();
        if glc {
            s.push_str(" glc");
        }
        if slc {
            s.push_str(" slc");
        }
        if dlc {
            s.push_str(" dlc");
        }
        s
    }

    fn sopp_text(&self) -> String {
        let m = self.mnemonic();
        let imm = self.word(0) & 0xffff;
        let fam = self.target.family();
        match m {
            "s_endpgm"
            | "s_endpgm_saved"
            | "s_code_end"
            | "s_barrier"
            | "s_ttracedata"
            | "s_icache_inv"
            | "s_wakeup"
            | "s_endpgm_ordered_ps_done"
            | "s_dcache_wb"
            | "s_set_gpr_idx_off"
            | "s_barrier_leave"
            | "s_wait_idle" => {
                if imm != 0 && m == "s_endpgm" {
                    format!("{m} {imm}")
                } else {
                    m.to_string()
                }
            }
            "s_clause" | "s_ttracedata_imm" | "s_barrier_wait" => format!("{m} {imm:#x}"),
            "s_waitcnt_depctr" | "s_wait_alu" => format!("{m} {}", self.depctr_text(imm)),
            "s_waitcnt" => waitcnt_text(fam, imm),
            _ if m.starts_with("s_wait_") && m.ends_with("cnt") => format!("{m} {imm:#x}"),
            "s_delay_alu" => delay_alu_text(imm),
            _ => format!("{m} {imm}"),
        }
    }
}

/// `s_waitcnt` operand (LLVM `AMDGPUBaseInfo` `decodeWaitcnt`): counters at their maximum are
/// omitted; all at maximum prints the raw value.
fn waitcnt_text(fam: Family, imm: u32) -> String {
    let (vm, exp, lgkm, vm_max, lgkm_max) = match fam {
        Family::Gfx9 => (
            (imm & 0xf) | ((imm >> 14) & 3) << 4,
            (imm >> 4) & 7,
            (imm >> 8) & 0xf,
            63,
            15,
        ),
        Family::Gfx10 => (
            (imm & 0xf) | ((imm >> 14) & 3) << 4,
            (imm >> 4) & 7,
            (imm >> 8) & 0x3f,
            63,
            63,
        ),
        _ => ((imm >> 10) & 0x3f, imm & 7, (imm >> 4) & 0x3f, 63, 63),
    };
    let mut parts = Vec::new();
    if vm != vm_max {
        parts.push(format!("vmcnt({vm})"));
    }
    if exp != 7 {
        parts.push(format!("expcnt({exp})"));
    }
    if lgkm != lgkm_max {
        parts.push(format!("lgkmcnt({lgkm})"));
    }
    if parts.is_empty() {
        format!("s_waitcnt {imm:#x}")
    } else {
        format!("s_waitcnt {}", parts.join(" "))
    }
}

/// `s_delay_alu` operand (LLVM `AMDGPUInstPrinter::printDelayFlag`).
fn delay_alu_text(imm: u32) -> String {
    const DEP: [&str; 12] = [
        "NO_DEP",
        "VALU_DEP_1",
        "VALU_DEP_2",
        "VALU_DEP_3",
        "VALU_DEP_4",
        "TRANS32_DEP_1",
        "TRANS32_DEP_2",
        "TRANS32_DEP_3",
        "FMA_ACCUM_CYCLE_1",
        "SALU_CYCLE_1",
        "SALU_CYCLE_2",
        "SALU_CYCLE_3",
    ];
    const SKIP: [&str; 6] = ["SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4"];
    let id0 = imm & 0xf;
    let skip = (imm >> 4) & 7;
    let id1 = (imm >> 7) & 0xf;
    let mut parts = Vec::new();
    if id0 != 0 {
        parts.push(format!(
            "instid0({})",
            DEP.get(id0 as usize).copied().unwrap_or("?")
        ));
    }
    if skip != 0 {
        parts.push(format!(
            "instskip({})",
            SKIP.get(skip as usize).copied().unwrap_or("?")
        ));
    }
    if id1 != 0 {
        parts.push(format!(
            "instid1({})",
            DEP.get(id1 as usize).copied().unwrap_or("?")
        ));
    }
    if parts.is_empty() {
        "s_delay_alu 0".to_string()
    } else {
        format!("s_delay_alu {}", parts.join(" | "))
    }
}

impl Instruction {
    /// Re-renders immediates the template shows at their template value.
    fn fix_modifiers(&self, out: &mut String) {
        match self.fmt.format {
            Format::Sopk => {
                let imm = self.word(0) & 0xffff;
                if let Some(p) = out.rfind("0x0") {
                    if p + 3 == out.len() {
                        out.replace_range(p.., &format!("{imm:#x}"));
                    }
                }
            }
            Format::Smem => {
                let off = self.mem_offset();
                let last = out.rsplit(", ").next().unwrap_or("").to_string();
                if (last == "0x0" || last == "null") && off != 0 {
                    let cut = out.len() - last.len();
                    out.replace_range(cut.., &format!("{off:#x}"));
                } else if off != 0 {
                    out.push_str(&format!(" offset:{off:#x}"));
                }
            }
            Format::Mubuf | Format::Mtbuf | Format::Flat | Format::Vbuffer => {
                if self.format() == Format::Flat && self.saddr_off() {
                    if let Some(p) = out.rfind(", off") {
                        if p + 5 == out.len() {
                            out.truncate(p);
                        }
                    }
                }
                if matches!(self.fmt.format, Format::Mubuf | Format::Mtbuf) {
                    let (offen, idxen) = self.buffer_addr_mode();
                    if offen || idxen {
                        if let Some(v) = self.field("vaddr") {
                            let w = if offen && idxen { 2 } else { 1 };
                            let t = range("v", v, w);
                            if let Some(p) = out.find(", off,") {
                                out.replace_range(p..p + 6, &format!(", {t},"));
                            }
                        }
                        out.push_str(match (idxen, offen) {
                            (true, true) => " idxen offen",
                            (true, false) => " idxen",
                            _ => " offen",
                        });
                    }
                }
                let off = self.mem_offset();
                if off != 0 {
                    out.push_str(&format!(" offset:{off}"));
                }
                out.push_str(&self.cache_policy_text());
            }
            Format::Ds => {
                let (o0, o1) = (self.word(0) & 0xff, (self.word(0) >> 8) & 0xff);
                let m = self.mnemonic();
                // Two-address forms (ds_read2*, ds_write2*, ds_wrxchg2*, *_2addr*) print
                // offset0/offset1; the others one 16-bit offset.
                if m.contains("2_") || m.contains("2st64") || m.contains("_2addr") {
                    if o0 != 0 {
                        out.push_str(&format!(" offset0:{o0}"));
                    }
                    if o1 != 0 {
                        out.push_str(&format!(" offset1:{o1}"));
                    }
                } else {
                    let o = self.word(0) & 0xffff;
                    if o != 0 {
                        out.push_str(&format!(" offset:{o}"));
                    }
                }
            }
            Format::Vop3p if self.row.asm.contains(" op_sel_hi:[") => {
                // Packed math modifiers: op_sel dword0 bits 11..=13, op_sel_hi dword1 bits 27, 28
                // and dword0 bit 14, neg_lo dword1 bits 29..=31, neg_hi dword0 bits 8..=10.
                let n = self.row.asm.matches("{src").count().clamp(1, 3);
                if let Some(p) = out.find(" op_sel") {
                    out.truncate(p);
                }
                let w0 = self.word(0);
                let w1 = self.word(1);
                let list = |bits: [u32; 3]| {
                    bits.iter()
                        .take(n)
                        .map(|b| b.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let op_sel = [w0 >> 11 & 1, w0 >> 12 & 1, w0 >> 13 & 1];
                let op_sel_hi = [w1 >> 27 & 1, w1 >> 28 & 1, w0 >> 14 & 1];
                let neg_lo = [w1 >> 29 & 1, w1 >> 30 & 1, w1 >> 31 & 1];
                let neg_hi = [w0 >> 8 & 1, w0 >> 9 & 1, w0 >> 10 & 1];
                if op_sel.iter().take(n).any(|b| *b != 0) {
                    out.push_str(&format!(" op_sel:[{}]", list(op_sel)));
                }
                if op_sel_hi.iter().take(n).any(|b| *b != 1) {
                    out.push_str(&format!(" op_sel_hi:[{}]", list(op_sel_hi)));
                }
                if neg_lo.iter().take(n).any(|b| *b != 0) {
                    out.push_str(&format!(" neg_lo:[{}]", list(neg_lo)));
                }
                if neg_hi.iter().take(n).any(|b| *b != 0) {
                    out.push_str(&format!(" neg_hi:[{}]", list(neg_hi)));
                }
                if w0 & (1 << 15) != 0 {
                    out.push_str(" clamp");
                }
            }
            Format::Vopd => {
                if let (Some(y), Some(x)) = (self.field("vdsty"), self.field("vdstx")) {
                    let vy = (y << 1) | (!x & 1);
                    if let Some(p) = out.find(":: ") {
                        if let Some(q) = out[p..].find(" v57") {
                            let at = p + q;
                            out.replace_range(at..at + 4, &format!(" v{vy}"));
                        }
                    }
                }
            }
            _ => {}
        }
        // Fixed literals (v_fmaak/v_fmamk/v_madak...): the template shows 0x0.
        if self.fmt.format != Format::Sopk && self.fmt.format != Format::Smem {
            if let (Some(l), Some(p)) = (self.literal(), out.find(", 0x0")) {
                let end = p + 5;
                if end == out.len()
                    || out.as_bytes().get(end) == Some(&b',')
                    || out.as_bytes().get(end) == Some(&b' ')
                {
                    out.replace_range(p + 2..end, &format!("{l:#x}"));
                }
            }
        }
    }
}

impl std::fmt::Display for Instruction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.fmt.format == Format::Sopp {
            return f.write_str(&self.sopp_text());
        }
        let mut out = String::with_capacity(64);
        let tpl = if self.row.asm.is_empty() {
            self.row.mnemonic
        } else {
            self.row.asm
        };
        let mut rest = tpl;
        while let Some(a) = rest.find('{') {
            out.push_str(&rest[..a]);
            let Some(b) = rest[a..].find('}') else { break };
            let name = &rest[a + 1..a + b];
            match self.field_text(name) {
                Some(t) => out.push_str(&t),
                None => {
                    let _ = write!(out, "{{{name}}}");
                }
            }
            rest = &rest[a + b + 1..];
        }
        out.push_str(rest);
        self.fix_modifiers(&mut out);
        f.write_str(&out)
    }
}
