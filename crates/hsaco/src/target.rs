//! Target identification from `e_flags` (LLVM `llvm/BinaryFormat/ELF.h` `EF_AMDGPU_*`,
//! AMDGPUUsage "ELF Header" and "Target ID").

use crate::error::{Error, Result};

/// `EF_AMDGPU_MACH_*` values (low 8 bits of `e_flags`) and processor names, from
/// `llvm/BinaryFormat/ELF.h` (LLVM 22), plus gfx940 (0x40) and gfx941 (0x4b): MI300
/// pre-production processors LLVM dropped in 2025 (LLVM 22 lists the values as
/// `RESERVED_0X40`/`RESERVED_0X4B`; names and values from LLVM 19 `ELF.h`). Their code objects
/// still ship (jax ROCm 6.0 wheels) and carry the gfx942 instruction set.
const MACHS: &[(u8, &str)] = &[
    (0x20, "gfx600"),
    (0x21, "gfx601"),
    (0x22, "gfx700"),
    (0x23, "gfx701"),
    (0x24, "gfx702"),
    (0x25, "gfx703"),
    (0x26, "gfx704"),
    (0x28, "gfx801"),
    (0x29, "gfx802"),
    (0x2a, "gfx803"),
    (0x2b, "gfx810"),
    (0x2c, "gfx900"),
    (0x2d, "gfx902"),
    (0x2e, "gfx904"),
    (0x2f, "gfx906"),
    (0x30, "gfx908"),
    (0x31, "gfx909"),
    (0x32, "gfx90c"),
    (0x33, "gfx1010"),
    (0x34, "gfx1011"),
    (0x35, "gfx1012"),
    (0x36, "gfx1030"),
    (0x37, "gfx1031"),
    (0x38, "gfx1032"),
    (0x39, "gfx1033"),
    (0x3a, "gfx602"),
    (0x3b, "gfx705"),
    (0x3c, "gfx805"),
    (0x3d, "gfx1035"),
    (0x3e, "gfx1034"),
    (0x3f, "gfx90a"),
    (0x40, "gfx940"),
    (0x41, "gfx1100"),
    (0x42, "gfx1013"),
    (0x43, "gfx1150"),
    (0x44, "gfx1103"),
    (0x45, "gfx1036"),
    (0x46, "gfx1101"),
    (0x47, "gfx1102"),
    (0x48, "gfx1200"),
    (0x49, "gfx1250"),
    (0x4a, "gfx1151"),
    (0x4b, "gfx941"),
    (0x4c, "gfx942"),
    (0x4e, "gfx1201"),
    (0x4f, "gfx950"),
    (0x51, "gfx9-generic"),
    (0x52, "gfx10-1-generic"),
    (0x53, "gfx10-3-generic"),
    (0x54, "gfx11-generic"),
    (0x55, "gfx1152"),
    (0x58, "gfx1153"),
    (0x59, "gfx12-generic"),
    (0x5a, "gfx1251"),
    (0x5f, "gfx9-4-generic"),
];

/// A feature setting of the target ID (AMDGPUUsage "Target Features": `xnack`, `sramecc`),
/// encoded in `e_flags` bits 8..9 (xnack) and 10..11 (sramecc) for code object v4+.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FeatureSetting {
    /// Not supported by the processor (field value 0).
    Unsupported,
    /// Any (works either way; field value 1).
    Any,
    /// Off (`-`, field value 2).
    Off,
    /// On (`+`, field value 3).
    On,
}

impl FeatureSetting {
    fn from_bits(v: u32) -> FeatureSetting {
        match v & 3 {
            0 => FeatureSetting::Unsupported,
            1 => FeatureSetting::Any,
            2 => FeatureSetting::Off,
            _ => FeatureSetting::On,
        }
    }
}

/// GPU generation as used by kernel descriptor and register-allocation rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Generation {
    /// GFX6 (SI).
    Gfx6,
    /// GFX7 (CI).
    Gfx7,
    /// GFX8 (VI).
    Gfx8,
    /// GFX9 (gfx900..gfx950 and gfx9 generics).
    Gfx9,
    /// GFX10 (gfx1010..gfx1036).
    Gfx10,
    /// GFX11 (gfx1100..gfx1153).
    Gfx11,
    /// GFX12 (gfx1200, gfx1201, gfx12-generic).
    Gfx12,
    /// GFX12.5 (gfx1250, gfx1251).
    Gfx125,
}

/// The target of a code object, decoded from `e_flags`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Target {
    /// `EF_AMDGPU_MACH_*` value (low 8 bits of `e_flags`).
    pub mach: u8,
    /// Processor name, e.g. `gfx942`, `gfx11-generic`.
    pub processor: String,
    /// XNACK setting (`e_flags` bits 8..9).
    pub xnack: FeatureSetting,
    /// SRAMECC setting (`e_flags` bits 10..11).
    pub sramecc: FeatureSetting,
    /// Generic code object version (top byte of `e_flags`, code object v6 generic targets; 0 otherwise).
    pub generic_version: u8,
}

impl Target {
    /// Decodes `e_flags` of a code object v4+ (AMDGPUUsage "AMDGPU ELF Header", table
    /// "AMDGPU ELF Header e_flags for Code Object V4 and After").
    ///
    /// Errors: [`Error::Malformed`] (offset 0x30) for an unknown or R600 machine.
    pub fn from_e_flags(e_flags: u32) -> Result<Target> {
        let mach = (e_flags & 0xff) as u8;
        let Some((_, name)) = MACHS.iter().find(|(m, _)| *m == mach) else {
            return Err(Error::Malformed {
                what: "e_flags",
                offset: 0x30,
                detail: format!("unknown EF_AMDGPU_MACH value {mach:#x}"),
            });
        };
        Ok(Target {
            mach,
            processor: (*name).to_string(),
            xnack: FeatureSetting::from_bits(e_flags >> 8),
            sramecc: FeatureSetting::from_bits(e_flags >> 10),
            generic_version: (e_flags >> 24) as u8,
        })
    }

    /// Target ID string as used by offload bundles and `amdhsa.target`, e.g.
    /// `gfx942:sramecc+:xnack-` (features sorted by name; `any` settings are omitted).
    pub fn target_id(&self) -> String {
        let mut s = self.processor.clone();
        for (name, f) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match f {
                FeatureSetting::On => s.push_str(&format!(":{name}+")),
                FeatureSetting::Off => s.push_str(&format!(":{name}-")),
                FeatureSetting::Any | FeatureSetting::Unsupported => {}
            }
        }
        s
    }

    /// Generation of the processor.
    pub fn generation(&self) -> Generation {
        let p = self.processor.as_str();
        if p.starts_with("gfx125") {
            Generation::Gfx125
        } else if p.starts_with("gfx12") {
            Generation::Gfx12
        } else if p.starts_with("gfx11") {
            Generation::Gfx11
        } else if p.starts_with("gfx10") {
            Generation::Gfx10
        } else if p.starts_with("gfx9") {
            Generation::Gfx9
        } else if p.starts_with("gfx8") {
            Generation::Gfx8
        } else if p.starts_with("gfx7") {
            Generation::Gfx7
        } else {
            Generation::Gfx6
        }
    }

    /// Largest metadata `.sgpr_count` a kernel of this target can have, in SGPRs: the SGPRs a
    /// wave can address plus the most special registers LLVM adds to the count (LLVM
    /// `AMDGPUBaseInfo` `getAddressableNumSGPRs` / `getNumExtraSGPRs`, and `.sgpr_count` =
    /// `NumSGPR` in `AMDGPUAsmPrinter` / `AMDGPUHSAMetadataStreamer`): 106 + VCC (2) from gfx10,
    /// 102 + VCC, XNACK_MASK and FLAT_SCRATCH (6) on gfx8/gfx9, 104 + VCC and FLAT_SCRATCH (4)
    /// on gfx6/gfx7; 108 on every generation.
    pub fn max_sgpr_count(&self) -> u32 {
        let (addressable, extra) = match self.generation() {
            Generation::Gfx6 | Generation::Gfx7 => (104, 4),
            Generation::Gfx8 | Generation::Gfx9 => (102, 6),
            Generation::Gfx10 | Generation::Gfx11 | Generation::Gfx12 | Generation::Gfx125 => {
                (106, 2)
            }
        };
        addressable + extra
    }

    /// True for processors with the gfx90a instruction set (unified VGPR/AGPR file, `accum_offset`,
    /// `tg_split`): gfx90a, gfx940, gfx941, gfx942, gfx950, gfx9-4-generic (LLVM
    /// `FeatureGFX90AInsts`).
    pub fn has_gfx90a_insts(&self) -> bool {
        matches!(
            self.processor.as_str(),
            "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic"
        )
    }

    /// True when the processor has the `xnack` target feature (AMDGPUUsage processor table,
    /// "Target Features Supported"; the same set clang-22's target-ID parser accepts `:xnack+`
    /// for, test `target_features`). gfx940 and gfx941, which LLVM 22 no longer knows, as gfx942
    /// (LLVM 19). For any other processor the `e_flags` field must be 0 ("unsupported").
    pub fn supports_xnack(&self) -> bool {
        matches!(
            self.processor.as_str(),
            "gfx801"
                | "gfx810"
                | "gfx900"
                | "gfx902"
                | "gfx904"
                | "gfx906"
                | "gfx908"
                | "gfx909"
                | "gfx90a"
                | "gfx90c"
                | "gfx940"
                | "gfx941"
                | "gfx942"
                | "gfx950"
                | "gfx9-generic"
                | "gfx9-4-generic"
                | "gfx1010"
                | "gfx1011"
                | "gfx1012"
                | "gfx1013"
                | "gfx10-1-generic"
        )
    }

    /// True when the processor has the `sramecc` target feature (as [`Target::supports_xnack`]).
    pub fn supports_sramecc(&self) -> bool {
        matches!(
            self.processor.as_str(),
            "gfx906"
                | "gfx908"
                | "gfx90a"
                | "gfx940"
                | "gfx941"
                | "gfx942"
                | "gfx950"
                | "gfx9-4-generic"
        )
    }

    /// True for processors with AGPRs (gfx908 and the gfx90a family; LLVM `FeatureMAIInsts`).
    pub fn has_agprs(&self) -> bool {
        self.processor == "gfx908" || self.has_gfx90a_insts()
    }

    /// True for gfx11/gfx12 processors with 1.5x VGPRs (LLVM `Feature1_5xVGPRs`: gfx1100,
    /// gfx1101, gfx1151, gfx1200, gfx1201, gfx12-generic? no: only listed processors).
    pub fn has_1_5x_vgprs(&self) -> bool {
        matches!(
            self.processor.as_str(),
            "gfx1100" | "gfx1101" | "gfx1151" | "gfx1200" | "gfx1201"
        )
    }
}

/// Code object version from `EI_ABIVERSION` (AMDGPUUsage "ELF Header": 2 = v4, 3 = v5, 4 = v6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum CodeObjectVersion {
    /// Code object v4 (`ELFABIVERSION_AMDGPU_HSA_V4` = 2).
    V4,
    /// Code object v5 (3).
    V5,
    /// Code object v6 (4).
    V6,
}

impl CodeObjectVersion {
    /// Maps `EI_ABIVERSION`; 0 (HSAIL-era v2) and other values are errors.
    pub fn from_abi_version(abi: u8, e_flags: u32) -> Result<CodeObjectVersion> {
        match abi {
            2 => Ok(CodeObjectVersion::V4),
            3 => Ok(CodeObjectVersion::V5),
            4 => Ok(CodeObjectVersion::V6),
            0 => Err(Error::LegacyAbi0 { e_flags }),
            v => Err(Error::UnsupportedAbiVersion(v)),
        }
    }

    /// Numeric version (4, 5, 6).
    pub fn number(self) -> u32 {
        match self {
            CodeObjectVersion::V4 => 4,
            CodeObjectVersion::V5 => 5,
            CodeObjectVersion::V6 => 6,
        }
    }
}
