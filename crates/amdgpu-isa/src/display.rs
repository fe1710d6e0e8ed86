//! LLVM-syntax text of instructions (goal: identical to `llvm-objdump-22 -d`).
//!
//! Each opcode row carries LLVM's text of its template decode with register fields replaced by
//! `{field}` (`isa-tables/ops/*.tsv`, column `asm`); register fields are rendered from the actual
//! encoding, then format-specific immediates (SOPP/SOPK operands, offsets, literals) are
//! re-rendered following LLVM's `AMDGPUInstPrinter`.
use crate::decode::Instruction;
use crate::tables::{FieldKind, RegFile, MCID_LOAD, MCID_STORE};
use crate::{Family, Format};
use std::fmt::Write as _;

mod image;
mod mem;
mod scalar;
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

    /// Memory instruction immediate offset in bytes, sign-extended where the encoding is signed
    /// (ISA manuals, microcode formats: MUBUF/MTBUF 12-bit unsigned, VBUFFER 24-bit signed,
    /// FLAT 13/12/13-bit unsigned, GLOBAL/SCRATCH 13/12/13-bit signed on gfx9/gfx10/gfx11, 24-bit
    /// signed on gfx12; SMEM 21-bit signed on gfx9 (`imm` forms only)/gfx10/gfx11, 24-bit signed
    /// on gfx12). 0 for formats without one (DS offsets are in
    /// [`crate::MemAccess::ds_offsets`]).
    pub fn mem_offset(&self) -> i64 {
        let fam = self.target.family();
        match self.fmt.format {
            Format::Mubuf | Format::Mtbuf => i64::from(self.word(0) & 0xfff),
            Format::Vbuffer => self.sbits(2, 31, 8),
            Format::Flat => match fam {
                // FLAT: unsigned, the whole field (llvm-mc-22 prints gfx10 0..=4095, gfx9 and
                // gfx11 0..=8191).
                Family::Gfx10 if self.format() == Format::Flat => i64::from(self.word(0) & 0xfff),
                Family::Gfx9 | Family::Gfx11 if self.format() == Format::Flat => {
                    i64::from(self.word(0) & 0x1fff)
                }
                Family::Gfx9 | Family::Gfx11 => self.sbits(0, 12, 0),
                Family::Gfx10 => self.sbits(0, 11, 0),
                _ => self.sbits(2, 31, 8),
            },
            Format::Smem if !self.smem_addressed() => 0,
            Format::Smem => match fam {
                // gfx9: 21-bit signed when `imm` (dword0 bit 17) is set, else the field names
                // an SGPR (LLVM prints it signed, e.g. `-0x10`).
                Family::Gfx9 if self.word(0) & (1 << 17) == 0 => 0,
                Family::Gfx9 => self.sbits(1, 20, 0),
                Family::Gfx10 | Family::Gfx11 => self.sbits(1, 20, 0),
                _ => self.sbits(1, 23, 0),
            },
            _ => 0,
        }
    }

    /// Depctr operand (`s_waitcnt_depctr`, `s_wait_alu`; LLVM `AMDGPU::DepCtr`; LLVM 22 lists
    /// `depctr_hold_cnt` from gfx10.3 on): fields not at their default (maximum), as
    /// `depctr_<name>(n)`; all of them when every field is at its default; hexadecimal when
    /// a bit outside the fields (6:5, and 7 on gfx10.1) is set.
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
        // gfx10.1 has no hold_cnt field (bit 7 must be 0 there).
        let n = self.target.name();
        let hold = !(n.starts_with("gfx101") || n == "gfx10-1-generic");
        let reserved = if hold { 0x60 } else { 0xe0 };
        if imm & reserved != 0 {
            return format!("{imm:#x}");
        }
        let all_default = imm | reserved == 0xffff;
        let parts: Vec<String> = fields
            .iter()
            .filter(|f| hold || f.0 != "depctr_hold_cnt")
            .filter_map(|&(n, lo, bits)| {
                let max = (1 << bits) - 1;
                let v = (imm >> lo) & max;
                (v != max || all_default).then(|| format!("{n}({v})"))
            })
            .collect();
        parts.join(" ")
    }

    /// gfx90a/gfx94x/gfx950: the memory encodings' `acc` bit selects AGPRs for the data
    /// operands (FLAT/MUBUF/MTBUF dword1 bit 23, DS dword0 bit 25; LLVM `SIInstrFormats.td`).
    pub(crate) fn acc_data(&self) -> bool {
        if !matches!(
            self.fmt.format,
            Format::Flat | Format::Mubuf | Format::Mtbuf | Format::Ds
        ) {
            return false;
        }
        let n = self.target.name();
        if !(n == "gfx90a"
            || n.starts_with("gfx94")
            || n.starts_with("gfx95")
            || n == "gfx9-4-generic")
        {
            return false;
        }
        match self.fmt.format {
            Format::Flat | Format::Mubuf | Format::Mtbuf => self.word(1) & (1 << 23) != 0,
            Format::Ds => self.word(0) & (1 << 25) != 0,
            _ => false,
        }
    }

    pub(crate) fn is_gfx94x(&self) -> bool {
        let n = self.target.name();
        n.starts_with("gfx94") || n.starts_with("gfx95") || n == "gfx9-4-generic"
    }

    /// Load/store/atomic class of a memory instruction (LLVM MCID mayLoad/mayStore).
    fn mem_kind(&self) -> (bool, bool) {
        (
            self.row.mcid & MCID_LOAD != 0,
            self.row.mcid & MCID_STORE != 0,
        )
    }

    /// gfx12/gfx1250 `th:` and `scope:` (VFLAT/VBUFFER/VIMAGE/VSAMPLE dword1 bits 22:20 and
    /// 19:18; SMEM dword0 bits 25:23 and 22:21; names from LLVM `CPol` in SIDefines.h).
    fn th_scope_text(&self, th: u32, scope: u32) -> String {
        let mut s = String::new();
        let (load, store) = self.mem_kind();
        let sys = scope == 3;
        let name = if load && store && self.mnemonic().contains("atomic") {
            match th {
                0 => String::new(),
                1 => "TH_ATOMIC_RETURN".into(),
                2 => "TH_ATOMIC_NT".into(),
                3 => "TH_ATOMIC_NT_RETURN".into(),
                4 | 5 if scope >= 2 => "TH_ATOMIC_CASCADE_RT".into(),
                6 | 7 if scope >= 2 => "TH_ATOMIC_CASCADE_NT".into(),
                t => format!("TH_ATOMIC_{t:#x}"),
            }
        } else if store && (!load || self.mnemonic().contains("_store")) {
            // (gfx1250 `global_store_async_from_lds_*` may load and store: store hints, as
            // llvm-mc-22 prints them.)
            match th {
                0 => String::new(),
                1 => "TH_STORE_NT".into(),
                2 => "TH_STORE_HT".into(),
                3 if sys => "TH_STORE_BYPASS".into(),
                3 => "TH_STORE_WB".into(),
                4 => "TH_STORE_NT_RT".into(),
                5 => "TH_STORE_RT_NT".into(),
                6 => "TH_STORE_NT_HT".into(),
                _ => "TH_STORE_NT_WB".into(),
            }
        } else {
            match th {
                0 => String::new(),
                1 => "TH_LOAD_NT".into(),
                2 => "TH_LOAD_HT".into(),
                3 if sys => "TH_LOAD_BYPASS".into(),
                3 => "TH_LOAD_LU".into(),
                4 => "TH_LOAD_NT_RT".into(),
                5 => "TH_LOAD_RT_NT".into(),
                6 => "TH_LOAD_NT_HT".into(),
                _ => "0x7".into(),
            }
        };
        if !name.is_empty() {
            let _ = write!(s, " th:{name}");
        }
        if scope != 0 {
            let _ = write!(
                s,
                " scope:{}",
                ["", "SCOPE_SE", "SCOPE_DEV", "SCOPE_SYS"][scope as usize]
            );
        }
        s
    }

    /// Cache policy of FLAT and MUBUF/MTBUF/VBUFFER encodings (ISA manuals, microcode formats;
    /// LLVM `printCPol`): gfx9 `glc slc` (+ gfx90a `scc`), gfx94x `sc0 nt sc1`, gfx10/gfx11
    /// `glc slc dlc`, gfx12 `th: scope:`.
    fn cache_policy_text(&self) -> String {
        let fam = self.target.family();
        let w = self.word(0);
        let w1 = self.word(1);
        if fam >= Family::Gfx12 {
            return self.th_scope_text((w1 >> 20) & 7, (w1 >> 18) & 3);
        }
        let bit = |b: u32| w & (1 << b) != 0;
        let m = self.mnemonic();
        let gfx90a = self.target.name() == "gfx90a";
        // Cache-control instructions without a cache policy operand.
        if (fam == Family::Gfx9 && !self.is_gfx94x() && m.starts_with("buffer_wb"))
            || m.starts_with("buffer_gl")
            || m.starts_with("buffer_wbinvl1")
            || (m == "buffer_invl2" && !self.is_gfx94x())
        {
            return String::new();
        }
        let (glc, slc, dlc, scc) = match (self.fmt.format, fam) {
            (Format::Flat, Family::Gfx9) => (bit(16), bit(17), false, bit(25)),
            (Format::Flat, Family::Gfx10) => (bit(16), bit(17), bit(12), false),
            (Format::Flat, _) => (bit(14), bit(15), bit(13), false),
            (Format::Mubuf, Family::Gfx9) => (bit(14), bit(17), false, bit(15)),
            // gfx90a `scc` / gfx940 `sc1`: dword1 bit 21 (llvm-mc-22).
            (Format::Mtbuf, Family::Gfx9) => {
                (bit(14), w1 & (1 << 22) != 0, false, w1 & (1 << 21) != 0)
            }
            (Format::Mubuf | Format::Mtbuf, Family::Gfx10) => {
                (bit(14), w1 & (1 << 22) != 0, bit(15), false)
            }
            (Format::Mubuf | Format::Mtbuf, _) => (bit(14), bit(12), bit(13), false),
            _ => (false, false, false, false),
        };
        let mut s = String::new();
        if self.is_gfx94x() {
            for (b, n) in [(glc, " sc0"), (slc, " nt"), (scc, " sc1")] {
                if b {
                    s.push_str(n);
                }
            }
            return s;
        }
        for (b, n) in [
            (glc, " glc"),
            (slc, " slc"),
            (dlc, " dlc"),
            (scc && gfx90a, " scc"),
        ] {
            if b {
                s.push_str(n);
            }
        }
        s
    }

    /// `ds_swizzle_b32` offset (LLVM `AMDGPUInstPrinter::printSwizzle`): QUAD_PERM, ROTATE,
    /// FFT, SWAP, REVERSE, BROADCAST or BITMASK_PERM by the lane arithmetic the bits encode.
    fn swizzle_text(imm: u32) -> String {
        match imm >> 13 {
            0b100 => {
                let l: Vec<String> = (0..4).map(|i| ((imm >> (2 * i)) & 3).to_string()).collect();
                return format!("swizzle(QUAD_PERM,{})", l.join(","));
            }
            0b110 => return format!("swizzle(ROTATE,{},{})", (imm >> 10) & 1, (imm >> 5) & 0x1f),
            0b111 => return format!("swizzle(FFT,{})", imm & 0x1f),
            0b101 => return imm.to_string(),
            _ => {}
        }
        let (and, or, xor) = (imm & 0x1f, (imm >> 5) & 0x1f, (imm >> 10) & 0x1f);
        if and == 0x1f && or == 0 && xor.count_ones() == 1 {
            return format!("swizzle(SWAP,{xor})");
        }
        if and == 0x1f && or == 0 && xor > 0 && (xor + 1).is_power_of_two() {
            return format!("swizzle(REVERSE,{})", xor + 1);
        }
        let group = 32 - and;
        if group > 1 && group.is_power_of_two() && or < group && xor == 0 {
            return format!("swizzle(BROADCAST,{group},{or})");
        }
        let pat: String = (0..5)
            .rev()
            .map(|b| {
                let (a, o, x) = ((and >> b) & 1, (or >> b) & 1, (xor >> b) & 1);
                match (a, o, x) {
                    (1, 0, 0) => 'p',
                    (1, 0, 1) => 'i',
                    _ => {
                        if o ^ x == 1 {
                            '1'
                        } else {
                            '0'
                        }
                    }
                }
            })
            .collect();
        format!("swizzle(BITMASK_PERM,\"{pat}\")")
    }

    /// `s_sendmsg` operand: LLVM's symbolic text from the family table, else the decimal value.
    /// LLVM decodes only the id/op/stream bits (`AMDGPU::SendMsg`: bits 9:0 before gfx11, the
    /// 8-bit id from gfx11 on) and names a known message even when other bits are set.
    fn sendmsg_text(&self, imm: u32) -> String {
        let t = self.target.def().sym.sendmsg;
        let find = |v: u32| {
            t.binary_search_by_key(&v, |e| u32::from(e.0))
                .ok()
                .map(|i| t[i].1)
        };
        let mask = if self.target.family() <= Family::Gfx10 {
            0x3ff
        } else {
            0xff
        };
        if let Some(s) = find(imm) {
            return s.to_string();
        }
        match find(imm & mask) {
            Some(s) if s.starts_with("sendmsg(MSG_") => s.to_string(),
            _ => imm.to_string(),
        }
    }

    /// `hwreg(...)` operand of s_getreg/s_setreg (simm16: id 5:0, offset 10:6, size-1 15:11;
    /// LLVM `AMDGPUInstPrinter::printHwreg`): the name when known, offset/size unless 0/32.
    fn hwreg_text(&self, imm: u32) -> String {
        let id = imm & 0x3f;
        let off = (imm >> 6) & 0x1f;
        let size = ((imm >> 11) & 0x1f) + 1;
        let mut name = self.target.def().sym.hwreg[id as usize];
        // gfx940+ names beyond the family table (generated with gfx900; LLVM
        // AMDGPUAsmUtils.cpp `Hwreg::Opr`, isGFX940 entries).
        if name.is_empty() && self.is_gfx94x() {
            name = match id {
                20 => "HW_REG_XCC_ID",
                21 => "HW_REG_SQ_PERF_SNAPSHOT_DATA",
                22 => "HW_REG_SQ_PERF_SNAPSHOT_DATA1",
                23 => "HW_REG_SQ_PERF_SNAPSHOT_PC_LO",
                24 => "HW_REG_SQ_PERF_SNAPSHOT_PC_HI",
                _ => "",
            };
        }
        let name = if name.is_empty() {
            id.to_string()
        } else {
            name.to_string()
        };
        if off == 0 && size == 32 {
            format!("hwreg({name})")
        } else {
            format!("hwreg({name}, {off}, {size})")
        }
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
            "s_clause"
            | "s_ttracedata_imm"
            | "s_barrier_wait"
            | "s_set_inst_prefetch_distance"
            | "s_inst_prefetch" => format!("{m} {imm:#x}"),
            "s_incperflevel" | "s_decperflevel" | "s_setprio" | "s_sethalt" | "s_round_mode"
            | "s_denorm_mode" => format!("{m} {}", imm_text(imm)),
            "s_waitcnt_depctr" | "s_wait_alu" => format!("{m} {}", self.depctr_text(imm)),
            "s_waitcnt" => waitcnt_text(fam, imm),
            "s_sendmsg" | "s_sendmsghalt" => format!("{m} {}", self.sendmsg_text(imm)),
            _ if m.starts_with("s_wait_") && m.ends_with("cnt") => format!("{m} {imm:#x}"),
            "s_delay_alu" => delay_alu_text(imm),
            "s_set_gpr_idx_mode" => format!("{m} {}", scalar::gpr_idx_text(imm)),
            // Branch displacements print as decimal; other immediates as LLVM prints a u16
            // immediate (`printU16ImmOperand`): decimal up to 64, else hexadecimal.
            _ if matches!(self.flow(), crate::Flow::Branch { .. }) => format!("{m} {imm}"),
            _ => format!("{m} {}", imm_text(imm)),
        }
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
            DEP.get(id0 as usize)
                .copied()
                .unwrap_or("/* invalid instid value */")
        ));
    }
    if skip != 0 {
        parts.push(format!(
            "instskip({})",
            SKIP.get(skip as usize)
                .copied()
                .unwrap_or("/* invalid instskip value */")
        ));
    }
    if id1 != 0 {
        parts.push(format!(
            "instid1({})",
            DEP.get(id1 as usize)
                .copied()
                .unwrap_or("/* invalid instid value */")
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

    /// Is the operand with this field float-typed? (Mnemonic type suffix; LLVM prints
    /// `neg`/`abs` DPP/SDWA source modifiers for float operands and `sext` for integer ones.)
    fn float_op(&self) -> bool {
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
    fn dpp_ctrl_text(&self, c: u32) -> String {
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
    fn dpp_sdwa(&self, out: &mut String) {
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
