//! What a decoded instruction touches (part of the decoder, `decode.rs`): the registers it
//! reads and writes (explicit operands and implicit uses, full widths) and the memory it
//! accesses.

use super::*;

impl Instruction {
    fn regs(&self, defs: bool) -> RegSet {
        let [reads, writes] = self.regs_of([!defs, defs]);
        if defs {
            writes
        } else {
            reads
        }
    }

    /// Registers read (`[0]`) and written (`[1]`), each built when `want` asks for it (the
    /// operand shapes are worked out once for both).
    fn regs_of(&self, want: [bool; 2]) -> [RegSet; 2] {
        let mut sets = [RegSet::new(), RegSet::new()];
        // Two-part instructions: both parts' registers (the prefix reads the scale VGPRs).
        if self.pair != 0 {
            for p in (0..2).filter_map(|i| self.pair_part(i)) {
                let [r, w] = p.regs_of(want);
                sets[0].union_with(&r);
                sets[1].union_with(&w);
            }
            return sets;
        }
        let sregs = self.target.def().sregs;
        let b = self.bytes();
        // Image instructions: operand widths from dmask/d16/tfe/dim/a16/NSA (crate::image).
        let image = self.image_shape();
        if let Some(sh) = &image {
            for (d, set) in sets.iter_mut().enumerate() {
                if want[d] {
                    sh.add_regs(sregs, d == 1, set);
                }
            }
        }
        // FLAT family and buffers: operands the mode bits add (decode/mem.rs).
        let shape = self.mem_shape();
        if let Some(s) = &shape {
            if want[0] {
                if let Some((v, w)) = self.mem_extra_vaddr(s) {
                    (0..u16::from(w)).for_each(|i| sets[0].add_vgpr(v + i));
                }
                if s.lds {
                    sets[0].add(SpecialReg::M0);
                }
            }
            if want[1] {
                if let (true, Some(v)) = (self.flat_atomic_returns(), self.field("vdst")) {
                    let file_a = self.acc_data();
                    for i in 0..u16::from(self.flat_atomic_vdst_width()) {
                        if file_a {
                            sets[1].add_agpr(v as u16 + i)
                        } else {
                            sets[1].add_vgpr(v as u16 + i)
                        }
                    }
                }
            }
        }
        // The real-true16 row of a 32-bit VOP encoding, looked up once for every operand.
        let half_row = self.e32_half_row();
        for o in self
            .row
            .operands
            .iter()
            .filter(|o| want[usize::from(o.def)] && image.is_none())
        {
            let set = &mut sets[usize::from(o.def)];
            let Some(f) = self.fmt.fields.get(usize::from(o.field)) else {
                continue;
            };
            let v = field_bits(b, f.dw, f.hi, f.lo) as u16;
            let mut width = self.f8f6f4_width(f.name).unwrap_or(o.width.max(1));
            // 16-bit operands of 32-bit VOP encodings: bit 7 selects the half of v0..v127.
            let half = |n: u16| {
                if half_operand(half_row, o.field) {
                    n & 0x7f
                } else {
                    n
                }
            };
            if self.fmt.format == Format::Exp && !self.exp_source_enabled(f.name) {
                continue;
            }
            // Memory instructions: operands the mode bits remove or widen (decode/mem.rs).
            if let Some(s) = &shape {
                match self.mem_operand_width(s, f.name, width) {
                    Some(w) => width = w,
                    None => continue,
                }
            }
            match (f.kind, o.file) {
                (FieldKind::Sx2, _) => (0..u16::from(width)).for_each(|i| set.add_sgpr(v * 2 + i)),
                (FieldKind::Sx4, _) => (0..u16::from(width)).for_each(|i| set.add_sgpr(v * 4 + i)),
                (FieldKind::V9, _) if v >= 256 => {
                    for i in 0..u16::from(width) {
                        if o.file == RegFile::Agpr || self.mai_acc(f.name) {
                            set.add_agpr(v - 256 + i)
                        } else {
                            set.add_vgpr(half(v - 256) + i)
                        }
                    }
                }
                // gfx90a+ `acc` bit of memory encodings, and MFMA `acc`/`acc_cd`: AGPR operands.
                (FieldKind::V8, RegFile::Vgpr)
                    if (self.acc_data()
                        && matches!(f.name, "vdata" | "vdst" | "data" | "data0" | "data1"))
                        || self.mai_acc(f.name) =>
                {
                    (0..u16::from(width)).for_each(|i| set.add_agpr(v + i))
                }
                (FieldKind::V8, RegFile::Vgpr) => {
                    (0..u16::from(width)).for_each(|i| set.add_vgpr(half(v) + i))
                }
                (FieldKind::V8, RegFile::Agpr) => {
                    (0..u16::from(width)).for_each(|i| set.add_agpr(v + i))
                }
                (FieldKind::Imm, _) => {}
                _ => set.add_scalar(sregs, v, width),
            }
        }
        if want[0] && image.is_none() {
            self.dpp_src0_regs(&mut sets[0]);
        }
        // SMEM offset SGPR: not a table operand (the tables list the immediate-offset forms).
        if let (true, Some(v)) = (want[0], self.smem_soffset()) {
            sets[0].add_scalar(sregs, v, 1);
        }
        // gfx9/gfx10 scalar atomics with `glc` (dword0 bit 16) return the old value into
        // `sdata` (LLVM `SM_Pseudo_Atomics` `_RTN` forms: `sdst` tied to `sdata`).
        if want[1]
            && self.fmt.format == Format::Smem
            && self.row.mnemonic.contains("_atomic_")
            && self.target.family() <= Family::Gfx10
            && self.word(0) & (1 << 16) != 0
        {
            if let Some((v, w)) = self.operand_reg("sdata") {
                sets[1].add_scalar(sregs, v, w);
            }
        }
        // VOPD: vdstY = (field << 1) | !(vdstX & 1) (LLVM VOPDInstructions.td).
        // The Y accumulators (v_dual_fmac_f32, v_dual_dot2acc_*) also read vdstY: src2Y is tied
        // to vdstY (`VOPD_Base` hasSrc2AccY); the X side's tie is in the table.
        let y_acc = matches!(
            self.row.mnemonic_y,
            "v_dual_fmac_f32" | "v_dual_dot2acc_f32_f16" | "v_dual_dot2acc_f32_bf16"
        );
        if self.fmt.format == Format::Vopd {
            if let (Some(y), Some(x)) = (self.field("vdsty"), self.field("vdstx")) {
                let v = ((y << 1) | (!x & 1)) as u16;
                if want[1] {
                    sets[1].add_vgpr(v);
                }
                if want[0] && y_acc {
                    sets[0].add_vgpr(v);
                }
            }
        }
        for (d, set) in sets.iter_mut().enumerate() {
            if !want[d] {
                continue;
            }
            let imp = if d == 1 {
                self.row.imp_defs
            } else {
                self.row.imp_uses
            };
            let wave32_vcc = self.target.family() >= Family::Gfx10 && imp & IMP_VCC_LO != 0;
            if imp & IMP_EXEC != 0 {
                set.add(SpecialReg::ExecLo);
                set.add(SpecialReg::ExecHi);
            }
            if imp & IMP_EXEC_LO != 0 {
                set.add(SpecialReg::ExecLo);
            }
            if imp & IMP_VCC != 0 {
                set.add(SpecialReg::VccLo);
                set.add(SpecialReg::VccHi);
            }
            if wave32_vcc {
                set.add(SpecialReg::VccLo);
            }
            if imp & IMP_SCC != 0 {
                set.add(SpecialReg::Scc);
            }
            if imp & IMP_M0 != 0 {
                set.add(SpecialReg::M0);
            }
            if imp & IMP_MODE != 0 {
                set.add(SpecialReg::Mode);
            }
            if imp & IMP_FLAT_SCR != 0 {
                set.add(SpecialReg::FlatScratchLo);
                set.add(SpecialReg::FlatScratchHi);
            }
        }
        sets
    }

    /// Registers read, explicit and implicit (LLVM implicit uses), full widths. Implicit VCC/EXEC
    /// are reported as both halves (the tables are wave64-neutral).
    pub fn reads(&self) -> RegSet {
        self.regs(false)
    }

    /// Registers written, explicit and implicit (LLVM implicit defs), full widths.
    pub fn writes(&self) -> RegSet {
        self.regs(true)
    }

    /// [`Instruction::reads`] and [`Instruction::writes`] together, the operand shapes worked
    /// out once.
    pub fn reads_writes(&self) -> (RegSet, RegSet) {
        let [r, w] = self.regs_of([true, true]);
        (r, w)
    }

    /// The opcode's operand encoded in field `name` and that field's index in the format, when
    /// the opcode has one (the format may define fields an opcode does not use).
    pub(crate) fn operand_of(&self, name: &str) -> Option<(usize, &'static OperandDef)> {
        let fi = self.fmt.fields.iter().position(|f| f.name == name)?;
        let o = self
            .row
            .operands
            .iter()
            .find(|o| usize::from(o.field) == fi)?;
        Some((fi, o))
    }

    fn operand_reg(&self, name: &str) -> Option<(u16, u8)> {
        let (fi, o) = self.operand_of(name)?;
        let f = &self.fmt.fields[fi];
        let v = field_bits(self.bytes(), f.dw, f.hi, f.lo) as u16;
        let v = match f.kind {
            FieldKind::Sx2 => v * 2,
            FieldKind::Sx4 => v * 4,
            _ => v,
        };
        Some((v, o.width.max(1)))
    }

    /// Buffer `(offen, idxen)` bits: gfx9/gfx10 dword0 bits 12/13, gfx11 dword1 bits 22/23,
    /// gfx12 VBUFFER dword1 bits 30/31 (ISA manuals, MUBUF/VBUFFER microcode formats).
    pub(crate) fn buffer_addr_mode(&self) -> (bool, bool) {
        match self.target.family() {
            Family::Gfx9 | Family::Gfx10 => {
                (self.word(0) & (1 << 12) != 0, self.word(0) & (1 << 13) != 0)
            }
            Family::Gfx11 => (self.word(1) & (1 << 22) != 0, self.word(1) & (1 << 23) != 0),
            _ => (self.word(1) & (1 << 30) != 0, self.word(1) & (1 << 31) != 0),
        }
    }

    /// Does this SMEM opcode take an address (`sbase` or PC-relative) and so an offset?
    /// (`s_dcache_inv`, `s_memtime`, ... have none.)
    pub(crate) fn smem_addressed(&self) -> bool {
        self.fmt.format == Format::Smem
            && (self.operand_reg("sbase").is_some() || self.row.mnemonic.ends_with("_pc_rel"))
    }

    /// SMEM offset register (encoded scalar operand number), if the encoding selects one.
    /// gfx9 (Vega ISA "SMEM" microcode format): `imm` dword0 bit 17, `soe` bit 14; `soe` takes
    /// the SGPR from dword1 bits 31:25, `imm = 0` without `soe` from the offset field (bits
    /// 6:0). gfx10+ (RDNA ISA manuals): dword1 bits 31:25, `null` selecting none (gfx9 keeps
    /// `null`, which reads no register).
    pub(crate) fn smem_soffset(&self) -> Option<u16> {
        if !self.smem_addressed() {
            return None;
        }
        let w0 = self.word(0);
        let w1 = self.word(1);
        if self.target.family() == Family::Gfx9 {
            // gfx9 `soe`/`imm = 0` select the register form even for `null` (LLVM prints
            // `null offset:...`).
            return match (w0 & (1 << 17) != 0, w0 & (1 << 14) != 0) {
                (_, true) => Some((w1 >> 25) as u16),
                (false, false) => Some((w1 & 0x7f) as u16),
                (true, false) => None,
            };
        }
        let v = w1 >> 25;
        let sregs = self.target.def().sregs;
        (sregs.get(v as usize).copied() != Some("null")).then_some(v as u16)
    }

    /// Memory access of DS, FLAT/GLOBAL/SCRATCH, buffer, image and SMEM instructions.
    pub fn memory(&self) -> Option<MemAccess> {
        let kind = mem_kind(
            self.row.mnemonic,
            self.row.mcid & MCID_LOAD != 0,
            self.row.mcid & MCID_STORE != 0,
        );
        let space = match self.format() {
            Format::Flat => MemSpace::Flat,
            Format::Global => MemSpace::Global,
            Format::Scratch => MemSpace::Scratch,
            Format::Mubuf | Format::Mtbuf | Format::Vbuffer => {
                let (offen, idxen) = self.buffer_addr_mode();
                MemSpace::Buffer { offen, idxen }
            }
            Format::Mimg | Format::Vimage | Format::Vsample => MemSpace::Image,
            Format::Ds if self.ds_gds() => MemSpace::Gds,
            Format::Ds => MemSpace::Lds,
            Format::Ldsdir => MemSpace::Lds,
            Format::Smem => MemSpace::Scalar,
            _ => return None,
        };
        let image = self.image_shape().map(|sh| sh.addrs[0]);
        let (vaddr, saddr) = match self.mem_shape() {
            // FLAT family and buffers: the mode bits decide (decode/mem.rs).
            Some(s) => {
                let vaddr = match self.fmt.format {
                    Format::Flat => self.field("addr"),
                    _ => self.field("vaddr"),
                };
                let saddr = self.field("saddr");
                (
                    vaddr.zip(s.vaddr).map(|(v, w)| (v as u16, w)),
                    saddr.zip(s.saddr).map(|(v, w)| (v as u16, w)),
                )
            }
            None => (
                image
                    .or_else(|| self.operand_reg("addr"))
                    .or_else(|| self.operand_reg("vaddr"))
                    .or_else(|| self.operand_reg("vaddr0")),
                self.operand_reg("saddr")
                    .or_else(|| self.operand_reg("sbase")),
            ),
        };
        let soffset = self
            .operand_reg("soffset")
            .map(|(v, _)| v)
            .or_else(|| self.smem_soffset());
        let srsrc = self.operand_reg("srsrc");
        let ds_offsets = (self.fmt.format == Format::Ds).then(|| {
            (
                (self.word(0) & 0xff) as u8,
                ((self.word(0) >> 8) & 0xff) as u8,
            )
        });
        Some(MemAccess {
            space,
            kind,
            vaddr,
            saddr,
            soffset,
            srsrc,
            ds_offsets,
        })
    }
}
