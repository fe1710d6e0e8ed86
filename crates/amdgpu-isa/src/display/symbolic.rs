//! Immediates LLVM prints symbolically (part of [`crate::display`]): SOPP/SOPK operands
//! (`s_waitcnt`, `s_delay_alu`, `s_waitcnt_depctr`/`s_wait_alu`, `s_sendmsg`, `hwreg(...)`,
//! branch targets) and the `ds_swizzle_b32` offset, following LLVM's `AMDGPUInstPrinter`.

use super::imm_text;
use crate::decode::Instruction;
use crate::Family;

impl Instruction {
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

    /// `ds_swizzle_b32` offset (LLVM `AMDGPUInstPrinter::printSwizzle`): QUAD_PERM, ROTATE,
    /// FFT, SWAP, REVERSE, BROADCAST or BITMASK_PERM by the lane arithmetic the bits encode.
    pub(super) fn swizzle_text(imm: u32) -> String {
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
    pub(super) fn hwreg_text(&self, imm: u32) -> String {
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

    /// Text of a SOPP instruction: its mnemonic and its immediate, symbolic where LLVM prints it
    /// so.
    pub(super) fn sopp_text(&self) -> String {
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
            "s_set_gpr_idx_mode" => format!("{m} {}", super::scalar::gpr_idx_text(imm)),
            // Branch displacements print as decimal; other immediates as LLVM prints a u16
            // immediate (`printU16ImmOperand`): decimal up to 64, else hexadecimal.
            _ if matches!(self.flow(), crate::Flow::Branch { .. }) => format!("{m} {imm}"),
            _ => format!("{m} {}", imm_text(imm)),
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
