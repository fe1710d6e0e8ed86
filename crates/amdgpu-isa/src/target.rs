//! Processors and families. Facts: `isa-tables/targets.tsv` (EF_AMDGPU_MACH values from LLVM 22
//! `llvm/BinaryFormat/ELF.h`; processor list from AMDGPUUsage "Processors"; gfx940/gfx941, which
//! LLVM dropped in 2025, with their LLVM 19 values and the gfx942 table, see
//! `tools/isa-gen/targets.in`).
use crate::tables::{TargetDef, TARGETS};

/// ISA family; encodings are shared inside a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Gfx9,
    Gfx10,
    Gfx11,
    Gfx12,
    Gfx1250,
}

/// An exact processor (including generic targets), plus the gfx11/gfx12 real-true16 decoding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    idx: u8,
    true16: bool,
}

impl Target {
    /// The processor named like LLVM's `-mcpu` (`"gfx942"`, `"gfx11-generic"`); target-id feature
    /// suffixes (`":xnack+"`, `":sramecc-"`) are ignored.
    pub fn from_name(mcpu: &str) -> Option<Target> {
        let base = mcpu.split(':').next().unwrap_or(mcpu);
        TARGETS.iter().position(|t| t.name == base).map(Target::at)
    }

    /// The processor of an `EF_AMDGPU_MACH_*` value (low 8 bits of ELF `e_flags`; higher bits are
    /// masked off here).
    pub fn from_elf_mach(ef_amdgpu_mach: u32) -> Option<Target> {
        let m = ef_amdgpu_mach & 0xff;
        TARGETS
            .iter()
            .position(|t| t.mach == Some(m))
            .map(Target::at)
    }

    /// All processors this crate knows.
    pub fn all() -> impl Iterator<Item = Target> {
        (0..TARGETS.len()).map(Target::at)
    }

    /// Target at table index `i`, in LLVM 22's default 16-bit mode: real-true16 on gfx11,
    /// fake16 on gfx12/gfx1250 (llvm-objdump-22 without `--mattr`).
    fn at(i: usize) -> Target {
        Target {
            idx: i as u8,
            true16: TARGETS[i].family == Family::Gfx11,
        }
    }

    pub(crate) fn def(&self) -> &'static TargetDef {
        &TARGETS[usize::from(self.idx)]
    }

    /// LLVM processor name.
    pub fn name(&self) -> &'static str {
        self.def().name
    }

    /// `EF_AMDGPU_MACH_*` value, if the ELF ABI defines one.
    pub fn elf_mach(&self) -> Option<u32> {
        self.def().mach
    }

    pub fn family(&self) -> Family {
        self.def().family
    }

    /// Selects real-true16 operand printing (default: on for gfx11, off for gfx12+, matching
    /// LLVM 22 defaults) (`v1.l`/`v1.h`) on gfx11/gfx12, as LLVM's
    /// `--mattr=+real-true16`. Lengths and classification do not depend on it.
    pub fn with_true16(self, on: bool) -> Target {
        Target { true16: on, ..self }
    }

    /// Whether real-true16 mode is selected.
    pub fn true16(&self) -> bool {
        self.true16
    }

    /// `s_ttracedata_imm` exists from gfx10 on (SOPP; LLVM 22 `SOPInstructions.td`).
    pub fn has_ttracedata_imm(&self) -> bool {
        self.family() != Family::Gfx9
    }
}
