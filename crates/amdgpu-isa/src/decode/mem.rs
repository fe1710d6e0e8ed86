//! Operand shapes of memory instructions that the opcode tables cannot express: the tables hold
//! one template row per opcode (the FLAT-family `SADDR` variant, the buffer `OFFSET` variant), while
//! the encoding's mode bits decide which address operands exist and how wide the data operand is.
//!
//! Facts (checked against llvm-mc-22 disassembly of every mode-bit combination; LLVM
//! `FLATInstructions.td`, `BUFInstructions.td`, `AMDGPUDisassembler.cpp`; ISA manuals,
//! "FLAT"/"MUBUF"/"MTBUF"/"VBUFFER"/"VFLAT" microcode formats):
//! - `saddr` = `off` is encoded 0x7f on gfx9, 0x7d (null) on gfx10, 0x7c (null) on gfx11+.
//! - GLOBAL (and gfx1250 FLAT with `saddr`): `saddr` off = 64-bit VGPR address, else a 32-bit
//!   VGPR offset plus the 64-bit scalar base (any scalar pair, e.g. `ttmp[12:13]`, `vcc`).
//! - SCRATCH: a VGPR address exists on gfx9 (not gfx940+) and gfx10 only when `saddr` is off
//!   (gfx10: 0x7d; 0x7f there is `off, off`); on gfx940+ when dword0 bit 13 (SVE) is set, on gfx11
//!   when dword1 bit 23 is set, on gfx12+ when dword1 bit 17 is set.
//! - gfx9 (not gfx940+)/gfx10 FLAT-family dword0 bit 13 and gfx9/gfx10 MUBUF dword0 bit 16
//!   (`lds`): the data goes to LDS at M0; there is no VGPR data operand.
//! - FLAT-family atomics with the return bit (gfx9/gfx10 dword0 bit 16, gfx11 bit 14, gfx12+ `th`
//!   bit 0 = dword1 bit 20): LLVM decodes the returning opcode, whose `vdst` is written.
//! - `tfe` (gfx9 without gfx90a+, gfx10 MUBUF/MTBUF dword1 bit 23; gfx11 MUBUF/MTBUF dword1 bit 21;
//!   gfx12 VBUFFER dword0 bit 22): the data operand is one dword wider (the status dword).
use super::Instruction;
use crate::{Family, Format};

/// Address and data operand shape of a FLAT-family or buffer instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemShape {
    /// Address VGPR (`vaddr`) width in dwords, `None` when the address has no VGPR part.
    pub vaddr: Option<u8>,
    /// Scalar base (`saddr`) width in dwords, `None` when it is `off`.
    pub saddr: Option<u8>,
    /// The data goes to/comes from LDS (`lds` bit): no VGPR data operand.
    pub lds: bool,
    /// `tfe`: the data operand has one more dword.
    pub tfe: bool,
}

impl Instruction {
    fn has_operand(&self, name: &str) -> bool {
        self.operand_of(name).is_some()
    }

    /// gfx90a and the gfx940 line (`acc` bit instead of `tfe` in the buffer encodings).
    fn is_gfx90a_plus(&self) -> bool {
        self.target.name() == "gfx90a" || self.is_gfx94x()
    }

    /// Encoding of `saddr` = `off` in the FLAT-family formats.
    pub(crate) fn saddr_off_code(&self) -> u32 {
        match self.target.family() {
            Family::Gfx9 => 0x7f,
            Family::Gfx10 => 0x7d,
            _ => 0x7c,
        }
    }

    /// A FLAT-family atomic whose return bit is set (see the module documentation).
    pub(crate) fn flat_atomic_returns(&self) -> bool {
        if self.fmt.format != Format::Flat || !self.mnemonic().contains("_atomic_") {
            return false;
        }
        match self.target.family() {
            Family::Gfx9 | Family::Gfx10 => self.word(0) & (1 << 16) != 0,
            Family::Gfx11 => self.word(0) & (1 << 14) != 0,
            _ => self.word(1) & (1 << 20) != 0,
        }
    }

    /// Width in dwords of the returned data of a returning FLAT-family atomic: the `data`
    /// width, halved for compare-and-swap (data = compare value + new value).
    pub(crate) fn flat_atomic_vdst_width(&self) -> u8 {
        let w = self
            .row
            .operands
            .iter()
            .find(|o| self.fmt.fields.get(usize::from(o.field)).map(|f| f.name) == Some("data"))
            .map_or(1, |o| o.width.max(1));
        if self.mnemonic().contains("cmpswap") {
            (w / 2).max(1)
        } else {
            w
        }
    }

    /// Width in dwords of the operand in field `name` given the mode bits (`width` from the
    /// opcode table); `None` when the operand does not exist in this encoding.
    pub(crate) fn mem_operand_width(&self, s: &MemShape, name: &str, width: u8) -> Option<u8> {
        match name {
            "addr" if self.fmt.format == Format::Flat => s.vaddr,
            "saddr" => s.saddr,
            "vdst" | "vdata" if s.lds => None,
            "vdst" | "vdata" if s.tfe => Some(width + 1),
            _ => Some(width),
        }
    }

    /// The address VGPR field when the table row lacks it (SCRATCH with SVE, buffers with
    /// `offen`/`idxen`): (first VGPR, width in dwords).
    pub(crate) fn mem_extra_vaddr(&self, s: &MemShape) -> Option<(u16, u8)> {
        let name = if self.fmt.format == Format::Flat {
            "addr"
        } else {
            "vaddr"
        };
        if self.has_operand(name) {
            return None;
        }
        Some((self.field(name)? as u16, s.vaddr?))
    }

    /// DS `gds` bit: GDS instead of LDS (gfx9 dword0 bit 16, gfx10/gfx11 bit 17; removed in
    /// gfx940 and gfx12; ISA manuals, "DS" microcode format; llvm-mc-22 prints ` gds`).
    pub(crate) fn ds_gds(&self) -> bool {
        self.fmt.format == Format::Ds
            && match self.target.family() {
                // gfx940+ has no GDS (llvm-mc-22 ignores the bit).
                Family::Gfx9 => !self.is_gfx94x() && self.word(0) & (1 << 16) != 0,
                Family::Gfx10 | Family::Gfx11 => self.word(0) & (1 << 17) != 0,
                _ => false,
            }
    }

    /// EXP: is the source in field `name` (`vsrc0`..`vsrc3`) read? Enable bits 3:0 select the
    /// sources; gfx9/gfx10 `compr` (dword0 bit 10) packs them into `vsrc0` (bits 0, 1) and
    /// `vsrc1` (bits 2, 3) (ISA manuals, "EXP" microcode format; llvm-mc-22 prints the same).
    pub(crate) fn exp_source_enabled(&self, name: &str) -> bool {
        let w0 = self.word(0);
        let en = w0 & 0xf;
        let compr = self.target.family() <= Family::Gfx10 && w0 & (1 << 10) != 0;
        match (compr, name) {
            (true, "vsrc0") => en & 3 != 0,
            (true, "vsrc1") => en & 0xc != 0,
            (true, _) => false,
            (false, "vsrc0") => en & 1 != 0,
            (false, "vsrc1") => en & 2 != 0,
            (false, "vsrc2") => en & 4 != 0,
            (false, "vsrc3") => en & 8 != 0,
            _ => true,
        }
    }

    /// The address/data shape of a FLAT, GLOBAL, SCRATCH, MUBUF, MTBUF or VBUFFER instruction
    /// (see the module documentation for the rules); `None` for other formats.
    pub(crate) fn mem_shape(&self) -> Option<MemShape> {
        let fam = self.target.family();
        let (w0, w1) = (self.word(0), self.word(1));
        match self.fmt.format {
            Format::Flat => {
                let old_lds = matches!(fam, Family::Gfx9 | Family::Gfx10) && !self.is_gfx94x();
                let saddr = self.field("saddr").unwrap_or(0x7f);
                let off = saddr == self.saddr_off_code();
                let lds = old_lds && w0 & (1 << 13) != 0;
                let has_addr = self.has_operand("addr");
                let has_saddr = self.has_operand("saddr");
                let shape = match self.format() {
                    Format::Scratch => {
                        let sve = match fam {
                            Family::Gfx9 if self.is_gfx94x() => w0 & (1 << 13) != 0,
                            Family::Gfx9 | Family::Gfx10 => off,
                            Family::Gfx11 => w1 & (1 << 23) != 0,
                            _ => w1 & (1 << 17) != 0,
                        };
                        // gfx10 0x7f: neither a VGPR nor an SGPR address (`off, off`).
                        let no_saddr = off || (fam == Family::Gfx10 && saddr == 0x7f);
                        MemShape {
                            vaddr: sve.then_some(1),
                            saddr: (!no_saddr).then_some(1),
                            lds,
                            tfe: false,
                        }
                    }
                    _ if !has_saddr => MemShape {
                        vaddr: has_addr.then_some(2),
                        saddr: None,
                        lds,
                        tfe: false,
                    },
                    _ => MemShape {
                        vaddr: has_addr.then_some(if off { 2 } else { 1 }),
                        saddr: (!off).then_some(2),
                        lds,
                        tfe: false,
                    },
                };
                Some(shape)
            }
            Format::Mubuf | Format::Mtbuf | Format::Vbuffer => {
                let (offen, idxen) = self.buffer_addr_mode();
                let tfe = match fam {
                    Family::Gfx9 => !self.is_gfx90a_plus() && w1 & (1 << 23) != 0,
                    Family::Gfx10 => w1 & (1 << 23) != 0,
                    Family::Gfx11 => w1 & (1 << 21) != 0,
                    _ => w0 & (1 << 22) != 0,
                };
                Some(MemShape {
                    vaddr: match (offen, idxen) {
                        (true, true) => Some(2),
                        (false, false) => None,
                        _ => Some(1),
                    },
                    saddr: None,
                    lds: self.fmt.format == Format::Mubuf
                        && matches!(fam, Family::Gfx9 | Family::Gfx10)
                        && w0 & (1 << 16) != 0,
                    tfe,
                })
            }
            _ => None,
        }
    }
}
