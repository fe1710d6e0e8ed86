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

mod dpp_sdwa;
mod image;
mod mem;
mod mem_fields;
mod scalar;
mod symbolic;
mod vop3;
mod vopx;

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
        // The table text may carry LLVM's operand-class comment of its template context.
        let name = name.split("/*").next().unwrap_or(name);
        // LLVM's decoder aligns SGPR/TTMP tuples down: 64-bit to 2, wider to 4 registers
        // (AMDGPUDisassembler createSRegOperand).
        let align = |n: u32| match width {
            0 | 1 => n,
            2 => n & !1,
            _ => n & !3,
        };
        if let Some(n) = name
            .strip_prefix("ttmp")
            .and_then(|n| n.parse::<u32>().ok())
        {
            return range("ttmp", align(n), width);
        }
        if let Some(n) = name.strip_prefix('s').and_then(|n| n.parse::<u32>().ok()) {
            return range("s", align(n), width);
        }
        if let Some(t) = self.scalar_literal_text(name, width) {
            return t;
        }
        if let (true, Some(l)) = (name.starts_with("lit64"), self.literal()) {
            return self.lit64_text(l, width);
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
                // LLVM printImmediate64: 1/(2*pi) at double precision.
                ("0.15915494", "0.15915494309189532"),
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
        let (fi, op) = self.operand_of(name)?;
        let f = &self.fmt.fields[fi];
        let v = self.field(name)?;
        let w = u32::from(self.f8f6f4_width(name).unwrap_or(op.width.max(1)));
        let e32 = matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc);
        let acc = (op.file == RegFile::Vgpr
            && matches!(name, "vdata" | "vdst" | "data" | "data0" | "data1")
            && self.acc_data())
            || self.mai_acc(name);
        let vreg = |n: u32| match (op.file, op.width) {
            (RegFile::Agpr, _) => range("a", n, w),
            _ if acc => range("a", n, w),
            // true16: in 32-bit encodings bit 7 of the VGPR number selects the high half.
            (_, 0) if self.target.true16() && e32 => {
                format!("v{}.{}", n & 0x7f, if n & 0x80 != 0 { 'h' } else { 'l' })
            }
            (_, 0) if self.target.true16() && !self.vop3_fake16() => {
                format!("v{n}.{}", if self.true16_hi(name) { 'h' } else { 'l' })
            }
            _ => range("v", n, w),
        };
        if let Some(t) = self.src16_text(name, v) {
            return Some(t);
        }
        let text = match f.kind {
            FieldKind::Sx2 => self.scalar_text(v * 2, w),
            FieldKind::Sx4 => self.scalar_text(v * 4, w),
            FieldKind::V9 if v >= 256 => vreg(v - 256),
            FieldKind::V8 if op.file != RegFile::Scalar => vreg(v),
            _ => self.scalar_text(v, w),
        };
        let text = self.vopx_src_text(name, v, text);
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

    /// VOP3/VOP3P source modifiers `neg` (dword1 bits 29..=31) and `abs` (dword0 bits 8..=10),
    /// printed `-|x|` where the opcode's modifier facts say LLVM prints them (`display/vop3.rs`).
    fn with_src_modifiers(&self, name: &str, text: String) -> String {
        let i = match name {
            "src0" => 0,
            "src1" => 1,
            "src2" => 2,
            _ => return text,
        };
        if self.is_bitop3() {
            return self.vop3_src_const(i, text);
        }
        if matches!(self.fmt.format, Format::Vop3 | Format::Vop3p) {
            self.vop3_src_mods(i, text)
        } else {
            text
        }
    }

    /// Signed value of bits `hi..=lo` of dword `dw`.
    fn sbits(&self, dw: usize, hi: u32, lo: u32) -> i64 {
        let n = hi - lo + 1;
        let v = (self.word(dw) >> lo) & if n >= 32 { u32::MAX } else { (1 << n) - 1 };
        let sh = 64 - n;
        (i64::from(v) << sh) >> sh
    }
}

/// A 32-bit immediate as LLVM prints a plain immediate operand: decimal when it is an inline
/// integer (-16..=64), else hexadecimal.
fn imm_text(v: u32) -> String {
    let i = v as i32;
    if (-16..=64).contains(&i) {
        i.to_string()
    } else {
        format!("{v:#x}")
    }
}

/// Float source modifiers as LLVM prints them: `-|x|`.
fn fp_mods(text: String, neg: bool, abs: bool) -> String {
    let t = if abs { format!("|{text}|") } else { text };
    if neg {
        format!("-{t}")
    } else {
        t
    }
}

impl Instruction {
    /// Re-renders immediates the template shows at their template value.
    fn fix_modifiers(&self, out: &mut String) {
        match self.fmt.format {
            Format::Sopk => {
                let imm = self.word(0) & 0xffff;
                if let Some(p) = out.find("hwreg(") {
                    let end = out[p..].find(')').map_or(out.len(), |e| p + e + 1);
                    out.replace_range(p..end, &self.hwreg_text(imm));
                    // s_setreg_imm32_b32: the 32-bit literal value.
                    if let (Some(l), true) = (self.literal(), out.ends_with(", 0")) {
                        let n = out.len() - 1;
                        out.replace_range(n.., &imm_text(l as u32));
                    }
                } else if let Some(p) = out.rfind("0x0") {
                    if p + 3 == out.len() {
                        out.replace_range(p.., &format!("{imm:#x}"));
                    }
                } else if out.ends_with(", 0") {
                    let n = out.len() - 1;
                    out.replace_range(n.., &imm.to_string());
                }
            }
            Format::Sop1 if out.contains("sendmsg(") => {
                if let (Some(p), Some(v)) = (out.find("sendmsg("), self.field("ssrc0")) {
                    let t = self.target.def().sym.sendmsg_rtn[(v & 0xff) as usize];
                    let t = if t.is_empty() {
                        v.to_string()
                    } else {
                        t.to_string()
                    };
                    out.replace_range(p.., &t);
                }
            }
            Format::Ds => {
                let (o0, o1) = (self.word(0) & 0xff, (self.word(0) >> 8) & 0xff);
                let m = self.mnemonic();
                // Two-address forms (ds_read2*, ds_write2*, ds_wrxchg2*, *_2addr*) print
                // offset0/offset1; the others one 16-bit offset.
                // (LLVM `DSInstructions.td`: read2/write2/wrxchg2 and their gfx11 names.)
                const TWO: [&str; 6] = [
                    "ds_read2",
                    "ds_write2",
                    "ds_wrxchg2",
                    "ds_load_2addr",
                    "ds_store_2addr",
                    "ds_storexchg_2addr",
                ];
                if TWO.iter().any(|p| m.starts_with(p)) {
                    if o0 != 0 {
                        out.push_str(&format!(" offset0:{o0}"));
                    }
                    if o1 != 0 {
                        out.push_str(&format!(" offset1:{o1}"));
                    }
                } else {
                    let o = self.word(0) & 0xffff;
                    if o != 0 && m == "ds_swizzle_b32" {
                        out.push_str(&format!(" offset:{}", Self::swizzle_text(o)));
                    } else if o != 0 {
                        out.push_str(&format!(" offset:{o}"));
                    }
                }
                let gds = self.ds_gds();
                if gds && !out.ends_with(" gds") {
                    out.push_str(" gds");
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
        self.fix_vopx(out);
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
        if let Some(t) = self.pair_text() {
            return f.write_str(&t);
        }
        if self.fmt.format == Format::Sopp {
            return f.write_str(&self.sopp_text());
        }
        if let Some(t) = self.smem_text() {
            return f.write_str(&t);
        }
        if let Some(t) = self.image_text() {
            return f.write_str(&t);
        }
        if let Some(t) = self.mem_text() {
            return f.write_str(&t);
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
        self.fix_scalar_symbolic(&mut out);
        self.fix_f16_sources(&mut out);
        self.wmma_mods(&mut out);
        self.vop3_trailing_mods(&mut out);
        self.vop3_dpp(&mut out);
        self.dpp_sdwa(&mut out);
        f.write_str(&out)
    }
}

/// Splits LLVM text `mnemonic op, op, op mod mod` into the operand list and the modifiers
/// (operands are separated by `, `; modifiers by spaces).
fn operands_and_mods(text: &str) -> (&str, &str) {
    let rest = text.split_once(' ').map_or("", |(_, r)| r);
    let mut end = 0;
    for (i, tok) in rest.split(' ').enumerate() {
        end += tok.len() + usize::from(i > 0);
        if !tok.ends_with(',') {
            break;
        }
    }
    let end = end.min(rest.len());
    (&rest[..end], rest[end..].trim_start())
}

impl Instruction {
    /// gfx1250 WMMA/SWMMAC and scale-load modifiers, right after the operands (LLVM 22
    /// `AMDGPUInstPrinter`, checked bit by bit with llvm-mc-22): `*_f8f6f4` WMMAs print
    /// `matrix_a_fmt` (dword0 bits 13:11) and `matrix_b_fmt` (dword0 bit 14, dword1 bits
    /// 28:27); other WMMA/SWMMAC print `matrix_a_reuse`/`matrix_b_reuse` (dword0 bits 13/14);
    /// `v_wmma_ld_scale*_paired` print `matrix_{a,b}_scale` (dword0 bit 11, dword1 bit 27),
    /// `matrix_{a,b}_scale_fmt` (dword1 bits 30:29, dword0 bits 9:8) and the reuse bits. The
    /// opcode template's text (decoded with bit 14 set) may carry a reuse flag: replaced.
    fn wmma_mods(&self, out: &mut String) {
        let m = self.row.mnemonic;
        if self.target.family() != Family::Gfx1250
            || self.fmt.format != Format::Vop3p
            || !(m.starts_with("v_wmma_") || m.starts_with("v_swmmac_"))
        {
            return;
        }
        for r in [" matrix_a_reuse", " matrix_b_reuse"] {
            if let Some(p) = out.find(r) {
                out.replace_range(p..p + r.len(), "");
            }
        }
        let (w0, w1) = (self.word(0), self.word(1));
        let bit = |w: u32, b: u32| w & (1 << b) != 0;
        let mut mods: Vec<String> = Vec::new();
        if m.ends_with("_f8f6f4") {
            const FMT: [&str; 5] = ["FP8", "BF8", "FP6", "BF6", "FP4"];
            let a = (w0 >> 11) & 7;
            let b = ((w0 >> 12) & 4) | ((w1 >> 27) & 3);
            for (n, v) in [("a", a), ("b", b)] {
                match FMT.get(v as usize) {
                    Some(_) if v == 0 => {}
                    Some(f) => mods.push(format!("matrix_{n}_fmt:MATRIX_FMT_{f}")),
                    None => mods.push(format!("matrix_{n}_fmt:{v}")),
                }
            }
        } else {
            if m.starts_with("v_wmma_ld_scale") {
                const SFMT: [&str; 4] = ["", "E5M3", "E4M3", ""];
                for (n, on) in [("a", bit(w0, 11)), ("b", bit(w1, 27))] {
                    if on {
                        mods.push(format!("matrix_{n}_scale:MATRIX_SCALE_ROW1"));
                    }
                }
                for (n, v) in [("a", (w1 >> 29) & 3), ("b", (w0 >> 8) & 3)] {
                    match (v, SFMT[v as usize]) {
                        (0, _) => {}
                        (v, "") => mods.push(format!("matrix_{n}_scale_fmt:{v}")),
                        (_, f) => mods.push(format!("matrix_{n}_scale_fmt:MATRIX_SCALE_FMT_{f}")),
                    }
                }
            }
            for (n, b) in [("a", 13), ("b", 14)] {
                if bit(w0, b) {
                    mods.push(format!("matrix_{n}_reuse"));
                }
            }
        }
        if mods.is_empty() {
            return;
        }
        let (ops, _) = operands_and_mods(out);
        let at = out.find(' ').map_or(out.len(), |p| p + 1 + ops.len());
        out.insert_str(at, &format!(" {}", mods.join(" ")));
    }

    /// Text of a two-part (VOP3PX2) instruction as LLVM 22 prints it: the pair's mnemonic,
    /// the MFMA/WMMA operands, the prefix's scale operands, then the modifiers. gfx950:
    /// the prefix's `op_sel:[a,b,0]` (when set) and `op_sel_hi:[c,d,0]` (always) before the
    /// MFMA's `cbsz`/`abid`/`blgp`; gfx1250: the WMMA's modifiers, then the prefix's.
    fn pair_text(&self) -> Option<String> {
        let p = self.pair_def()?;
        let (pre, main) = (self.pair_part(0)?, self.pair_part(1)?);
        let (pt, mt) = (pre.to_string(), main.to_string());
        let (pops, pmods) = operands_and_mods(&pt);
        let (mops, mmods) = operands_and_mods(&mt);
        let mut out = format!("{} {mops}, {pops}", p.mnemonic);
        let mods: Vec<String> = if self.target.family() == Family::Gfx9 {
            let (w0, w1) = (self.word(0), self.word(1));
            let b = |w: u32, k: u32| (w >> k) & 1;
            let mut v = Vec::new();
            if w0 & (3 << 11) != 0 {
                v.push(format!("op_sel:[{},{},0]", b(w0, 11), b(w0, 12)));
            }
            v.push(format!("op_sel_hi:[{},{},0]", b(w1, 27), b(w1, 28)));
            // The pair fixes the MFMA's abid bits to 1 (pairs.tsv); LLVM prints no abid.
            v.extend(
                mmods
                    .split(' ')
                    .filter(|m| !m.is_empty() && !m.starts_with("abid:"))
                    .map(String::from),
            );
            v
        } else {
            // gfx1250: the WMMA's matrix formats, the prefix's scale modifiers, then the rest;
            // the reuse flags are the prefix's (the pair fixes the WMMA's bits).
            let m: Vec<&str> = mmods
                .split(' ')
                .filter(|m| !m.is_empty() && !m.ends_with("_reuse"))
                .collect();
            let (fmts, rest): (Vec<&str>, Vec<&str>) =
                m.into_iter().partition(|m| m.starts_with("matrix_"));
            fmts.into_iter()
                .chain(pmods.split(' ').filter(|m| !m.is_empty()))
                .chain(rest)
                .map(String::from)
                .collect()
        };
        for m in mods {
            out.push(' ');
            out.push_str(&m);
        }
        Some(out)
    }
}
