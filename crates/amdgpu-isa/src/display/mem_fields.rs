//! Fields of memory instructions that the text and other users read (part of
//! [`crate::display`]): the immediate offset, the gfx90a/gfx94x AGPR data bit, the load/store
//! class, and the cache-policy modifiers (`glc`/`slc`/`dlc`/`nt`/`sc0`/`sc1`, gfx12 `th:` and
//! `scope:`).

use crate::decode::Instruction;
use crate::tables::{MCID_LOAD, MCID_STORE};
use crate::{Family, Format};
use std::fmt::Write as _;

impl Instruction {
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
    pub(super) fn th_scope_text(&self, th: u32, scope: u32) -> String {
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
    pub(super) fn cache_policy_text(&self) -> String {
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
}
