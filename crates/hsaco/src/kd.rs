//! Kernel descriptor (64 bytes, AMDGPUUsage "Kernel Descriptor"; field layout from LLVM
//! `llvm/Support/AMDHSAKernelDescriptor.h`), register granules and occupancy rules
//! (LLVM `AMDGPUBaseInfo.cpp`: `getVGPRAllocGranule`, `getVGPREncodingGranule`,
//! `getTotalNumVGPRs`, `getMaxWavesPerEU`, `getSGPREncodingGranule`).

use crate::error::{Error, Result};
use crate::target::{CodeObjectVersion, Generation, Target};

/// Size of a kernel descriptor in bytes.
pub const KD_SIZE: usize = 64;

/// The 64-byte kernel descriptor as raw fields; [`KernelDescriptor::encode`] reproduces the
/// input bytes exactly (reserved bytes are kept).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KernelDescriptor {
    /// 0x00 `group_segment_fixed_size` (bytes of LDS).
    pub group_segment_fixed_size: u32,
    /// 0x04 `private_segment_fixed_size` (bytes of scratch per work-item).
    pub private_segment_fixed_size: u32,
    /// 0x08 `kernarg_size` (bytes).
    pub kernarg_size: u32,
    /// 0x0C reserved (4 bytes).
    pub reserved0: [u8; 4],
    /// 0x10 `kernel_code_entry_byte_offset`: entry address minus descriptor address (bytes).
    pub kernel_code_entry_byte_offset: i64,
    /// 0x18 reserved (20 bytes).
    pub reserved1: [u8; 20],
    /// 0x2C `compute_pgm_rsrc3`.
    pub compute_pgm_rsrc3: u32,
    /// 0x30 `compute_pgm_rsrc1`.
    pub compute_pgm_rsrc1: u32,
    /// 0x34 `compute_pgm_rsrc2`.
    pub compute_pgm_rsrc2: u32,
    /// 0x38 `kernel_code_properties` (u16).
    pub kernel_code_properties: u16,
    /// 0x3A `kernarg_preload` (u16: bits 0..6 length in SGPRs, bits 7..15 offset in dwords).
    pub kernarg_preload: u16,
    /// 0x3C reserved (4 bytes).
    pub reserved3: [u8; 4],
}

fn field(v: u32, shift: u32, width: u32) -> u32 {
    (v >> shift) & ((1u32 << width) - 1)
}

fn set_field(v: u32, shift: u32, width: u32, x: u32) -> u32 {
    let mask = ((1u32 << width) - 1) << shift;
    (v & !mask) | ((x << shift) & mask)
}

impl KernelDescriptor {
    /// Decodes 64 bytes. Errors: [`Error::Truncated`] when fewer than 64 bytes are given
    /// (`offset` is reported as the file offset of the descriptor).
    pub fn decode(bytes: &[u8], offset: u64) -> Result<KernelDescriptor> {
        if bytes.len() < KD_SIZE {
            return Err(Error::Truncated {
                what: "kernel descriptor",
                offset,
                need: KD_SIZE as u64,
                len: bytes.len() as u64,
            });
        }
        let u32_ =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let mut r0 = [0u8; 4];
        r0.copy_from_slice(&bytes[0x0c..0x10]);
        let mut e = [0u8; 8];
        e.copy_from_slice(&bytes[0x10..0x18]);
        let mut r1 = [0u8; 20];
        r1.copy_from_slice(&bytes[0x18..0x2c]);
        let mut r3 = [0u8; 4];
        r3.copy_from_slice(&bytes[0x3c..0x40]);
        Ok(KernelDescriptor {
            group_segment_fixed_size: u32_(0),
            private_segment_fixed_size: u32_(4),
            kernarg_size: u32_(8),
            reserved0: r0,
            kernel_code_entry_byte_offset: i64::from_le_bytes(e),
            reserved1: r1,
            compute_pgm_rsrc3: u32_(0x2c),
            compute_pgm_rsrc1: u32_(0x30),
            compute_pgm_rsrc2: u32_(0x34),
            kernel_code_properties: u16::from_le_bytes([bytes[0x38], bytes[0x39]]),
            kernarg_preload: u16::from_le_bytes([bytes[0x3a], bytes[0x3b]]),
            reserved3: r3,
        })
    }

    /// Encodes the 64 bytes (bit-exact inverse of [`KernelDescriptor::decode`]).
    pub fn encode(&self) -> [u8; KD_SIZE] {
        let mut b = [0u8; KD_SIZE];
        b[0..4].copy_from_slice(&self.group_segment_fixed_size.to_le_bytes());
        b[4..8].copy_from_slice(&self.private_segment_fixed_size.to_le_bytes());
        b[8..12].copy_from_slice(&self.kernarg_size.to_le_bytes());
        b[0x0c..0x10].copy_from_slice(&self.reserved0);
        b[0x10..0x18].copy_from_slice(&self.kernel_code_entry_byte_offset.to_le_bytes());
        b[0x18..0x2c].copy_from_slice(&self.reserved1);
        b[0x2c..0x30].copy_from_slice(&self.compute_pgm_rsrc3.to_le_bytes());
        b[0x30..0x34].copy_from_slice(&self.compute_pgm_rsrc1.to_le_bytes());
        b[0x34..0x38].copy_from_slice(&self.compute_pgm_rsrc2.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&self.kernel_code_properties.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&self.kernarg_preload.to_le_bytes());
        b[0x3c..0x40].copy_from_slice(&self.reserved3);
        b
    }

    /// `compute_pgm_rsrc1.GRANULATED_WORKITEM_VGPR_COUNT` (bits 0..5).
    pub fn granulated_vgpr_count(&self) -> u32 {
        field(self.compute_pgm_rsrc1, 0, 6)
    }
    /// Sets `GRANULATED_WORKITEM_VGPR_COUNT` (value truncated to 6 bits).
    pub fn set_granulated_vgpr_count(&mut self, g: u32) {
        self.compute_pgm_rsrc1 = set_field(self.compute_pgm_rsrc1, 0, 6, g);
    }
    /// `compute_pgm_rsrc1.GRANULATED_WAVEFRONT_SGPR_COUNT` (bits 6..9; must be 0 on gfx10+).
    pub fn granulated_sgpr_count(&self) -> u32 {
        field(self.compute_pgm_rsrc1, 6, 4)
    }
    /// Sets `GRANULATED_WAVEFRONT_SGPR_COUNT` (4 bits).
    pub fn set_granulated_sgpr_count(&mut self, g: u32) {
        self.compute_pgm_rsrc1 = set_field(self.compute_pgm_rsrc1, 6, 4, g);
    }
    /// `kernel_code_properties.ENABLE_WAVEFRONT_SIZE32` (bit 10; gfx10+).
    pub fn wave32(&self) -> bool {
        self.kernel_code_properties & (1 << 10) != 0
    }
    /// Wave size in lanes (32 or 64).
    pub fn wave_size(&self) -> u32 {
        if self.wave32() {
            32
        } else {
            64
        }
    }
    /// `kernel_code_properties.USES_DYNAMIC_STACK` (bit 11).
    pub fn uses_dynamic_stack(&self) -> bool {
        self.kernel_code_properties & (1 << 11) != 0
    }
    /// `kernarg_preload.LENGTH` (bits 0..6): number of kernarg SGPRs preloaded (dwords).
    pub fn kernarg_preload_length(&self) -> u32 {
        u32::from(self.kernarg_preload & 0x7f)
    }
    /// `kernarg_preload.OFFSET` (bits 7..15): first preloaded kernarg dword.
    pub fn kernarg_preload_offset(&self) -> u32 {
        u32::from(self.kernarg_preload >> 7)
    }
    /// `compute_pgm_rsrc3.ACCUM_OFFSET` (gfx90a family, bits 0..5): first AGPR = (value + 1) * 4.
    pub fn accum_offset_field(&self) -> u32 {
        field(self.compute_pgm_rsrc3, 0, 6)
    }
    /// Sets `ACCUM_OFFSET` from a register number (multiple of 4, 4..256).
    pub fn set_accum_offset(&mut self, first_agpr: u32) {
        let v = (first_agpr.max(4) / 4).saturating_sub(1);
        self.compute_pgm_rsrc3 = set_field(self.compute_pgm_rsrc3, 0, 6, v);
    }
    /// `compute_pgm_rsrc3.TG_SPLIT` (gfx90a family, bit 16).
    pub fn tg_split(&self) -> bool {
        self.compute_pgm_rsrc3 & (1 << 16) != 0
    }
    /// `compute_pgm_rsrc3.INST_PREF_SIZE` (gfx11: bits 4..9, gfx12+: bits 4..11), in 128-byte
    /// cache lines; `None` before gfx11.
    pub fn inst_pref_size(&self, gen: Generation) -> Option<u32> {
        match gen {
            Generation::Gfx11 => Some(field(self.compute_pgm_rsrc3, 4, 6)),
            Generation::Gfx12 | Generation::Gfx125 => Some(field(self.compute_pgm_rsrc3, 4, 8)),
            _ => None,
        }
    }
    /// Sets `INST_PREF_SIZE` (gfx11+, clamped to the field width); no effect before gfx11.
    pub fn set_inst_pref_size(&mut self, gen: Generation, lines: u32) {
        let width = match gen {
            Generation::Gfx11 => 6,
            Generation::Gfx12 | Generation::Gfx125 => 8,
            _ => return,
        };
        let v = lines.min((1 << width) - 1);
        self.compute_pgm_rsrc3 = set_field(self.compute_pgm_rsrc3, 4, width, v);
    }
    /// `compute_pgm_rsrc2.USER_SGPR_COUNT` (bits 1..5; 1..6 on gfx1250).
    pub fn user_sgpr_count(&self, gen: Generation) -> u32 {
        if gen == Generation::Gfx125 {
            field(self.compute_pgm_rsrc2, 1, 6)
        } else {
            field(self.compute_pgm_rsrc2, 1, 5)
        }
    }
    /// `compute_pgm_rsrc2.GRANULATED_LDS_SIZE` (bits 15..23; set by the CP, normally 0).
    pub fn granulated_lds_size(&self) -> u32 {
        field(self.compute_pgm_rsrc2, 15, 9)
    }

    /// Entry address = descriptor address + `kernel_code_entry_byte_offset` (wrapping).
    pub fn entry_address(&self, kd_address: u64) -> u64 {
        kd_address.wrapping_add(self.kernel_code_entry_byte_offset as u64)
    }

    /// [`Occupancy`] this descriptor gives on `target` by itself: its allocated VGPRs, its SGPR
    /// allocation (gfx9; 0 where the descriptor has none) and its group segment size (bytes),
    /// through [`occupancy`].
    pub fn occupancy(&self, target: &Target) -> Occupancy {
        let r = self.registers(target);
        occupancy(
            target,
            r.wave32,
            r.vgprs_allocated,
            r.sgprs.unwrap_or(0),
            self.group_segment_fixed_size,
        )
    }

    /// Register counts implied by the granulated fields (allocation as seen by the hardware).
    pub fn registers(&self, target: &Target) -> RegisterCounts {
        let wave32 = self.wave32();
        let enc = vgpr_encoding_granule(target, wave32);
        let vgprs_allocated = (self.granulated_vgpr_count() + 1) * enc;
        let (arch_vgprs, agprs) = if target.has_gfx90a_insts() {
            let acc = (self.accum_offset_field() + 1) * 4;
            (
                acc.min(vgprs_allocated),
                vgprs_allocated.saturating_sub(acc),
            )
        } else {
            (vgprs_allocated, 0)
        };
        let sgprs = if target.generation() >= Generation::Gfx10 {
            None
        } else {
            Some((self.granulated_sgpr_count() + 1) * SGPR_ENCODING_GRANULE)
        };
        RegisterCounts {
            vgprs_allocated,
            arch_vgprs,
            agprs,
            sgprs,
            wave32,
        }
    }

    /// `.amdhsa_*` directives as `llvm-objdump -d` (LLVM 22 `AMDGPUDisassembler`
    /// `decodeKernelDescriptor`) prints them for this target, name without the `.amdhsa_` prefix.
    /// Directives LLVM prints only as comments are omitted; `uses_dynamic_stack` and kernarg
    /// preload exist from code object v5.
    pub fn directives(
        &self,
        target: &Target,
        version: CodeObjectVersion,
    ) -> Vec<(&'static str, u64)> {
        let gen = target.generation();
        let arch_fs = has_architected_flat_scratch(target);
        let r1 = self.compute_pgm_rsrc1;
        let r2 = self.compute_pgm_rsrc2;
        let r3 = self.compute_pgm_rsrc3;
        let kcp = u32::from(self.kernel_code_properties);
        let f = |v: u32, s: u32, w: u32| u64::from(field(v, s, w));
        let mut d: Vec<(&'static str, u64)> = vec![
            (
                "group_segment_fixed_size",
                u64::from(self.group_segment_fixed_size),
            ),
            (
                "private_segment_fixed_size",
                u64::from(self.private_segment_fixed_size),
            ),
            ("kernarg_size", u64::from(self.kernarg_size)),
        ];
        if target.has_gfx90a_insts() {
            d.push((
                "accum_offset",
                u64::from((self.accum_offset_field() + 1) * 4),
            ));
            d.push(("tg_split", f(r3, 16, 1)));
        }
        if gen >= Generation::Gfx10 {
            if gen < Generation::Gfx12 && !self.wave32() {
                d.push(("shared_vgpr_count", f(r3, 0, 4)));
            }
            if let Some(p) = self.inst_pref_size(gen) {
                d.push(("inst_pref_size", u64::from(p)));
            }
            if gen == Generation::Gfx125 {
                d.push(("named_barrier_count", f(r3, 14, 3)));
            }
        }
        d.push((
            "next_free_vgpr",
            u64::from(
                (self.granulated_vgpr_count() + 1) * vgpr_encoding_granule(target, self.wave32()),
            ),
        ));
        d.push(("reserve_vcc", 0));
        if !arch_fs {
            d.push(("reserve_flat_scratch", 0));
        }
        // LLVM 22 prints 1 on gfx12.5 targets with an XNACK setting (observed), else 0.
        let xnack_default =
            gen == Generation::Gfx125 && target.xnack != crate::target::FeatureSetting::Unsupported;
        d.push(("reserve_xnack_mask", u64::from(xnack_default)));
        d.push((
            "next_free_sgpr",
            u64::from((self.granulated_sgpr_count() + 1) * SGPR_ENCODING_GRANULE),
        ));
        d.push(("float_round_mode_32", f(r1, 12, 2)));
        d.push(("float_round_mode_16_64", f(r1, 14, 2)));
        d.push(("float_denorm_mode_32", f(r1, 16, 2)));
        d.push(("float_denorm_mode_16_64", f(r1, 18, 2)));
        if gen < Generation::Gfx12 {
            d.push(("dx10_clamp", f(r1, 21, 1)));
            d.push(("ieee_mode", f(r1, 23, 1)));
        }
        if gen >= Generation::Gfx9 {
            d.push(("fp16_overflow", f(r1, 26, 1)));
        }
        if gen >= Generation::Gfx10 {
            if gen != Generation::Gfx125 {
                d.push(("workgroup_processor_mode", f(r1, 29, 1)));
            }
            d.push(("memory_ordered", f(r1, 30, 1)));
            d.push(("forward_progress", f(r1, 31, 1)));
        }
        if gen >= Generation::Gfx12 {
            d.push(("round_robin_scheduling", f(r1, 21, 1)));
        }
        if arch_fs {
            d.push(("enable_private_segment", f(r2, 0, 1)));
        } else {
            d.push(("system_sgpr_private_segment_wavefront_offset", f(r2, 0, 1)));
        }
        d.push(("system_sgpr_workgroup_id_x", f(r2, 7, 1)));
        d.push(("system_sgpr_workgroup_id_y", f(r2, 8, 1)));
        d.push(("system_sgpr_workgroup_id_z", f(r2, 9, 1)));
        d.push(("system_sgpr_workgroup_info", f(r2, 10, 1)));
        d.push(("system_vgpr_workitem_id", f(r2, 11, 2)));
        d.push(("exception_fp_ieee_invalid_op", f(r2, 24, 1)));
        d.push(("exception_fp_denorm_src", f(r2, 25, 1)));
        d.push(("exception_fp_ieee_div_zero", f(r2, 26, 1)));
        d.push(("exception_fp_ieee_overflow", f(r2, 27, 1)));
        d.push(("exception_fp_ieee_underflow", f(r2, 28, 1)));
        d.push(("exception_fp_ieee_inexact", f(r2, 29, 1)));
        d.push(("exception_int_div_zero", f(r2, 30, 1)));
        if !arch_fs {
            d.push(("user_sgpr_private_segment_buffer", f(kcp, 0, 1)));
        }
        d.push(("user_sgpr_dispatch_ptr", f(kcp, 1, 1)));
        d.push(("user_sgpr_queue_ptr", f(kcp, 2, 1)));
        d.push(("user_sgpr_kernarg_segment_ptr", f(kcp, 3, 1)));
        d.push(("user_sgpr_dispatch_id", f(kcp, 4, 1)));
        if !arch_fs {
            d.push(("user_sgpr_flat_scratch_init", f(kcp, 5, 1)));
        }
        d.push(("user_sgpr_private_segment_size", f(kcp, 6, 1)));
        if gen >= Generation::Gfx10 {
            d.push(("wavefront_size32", f(kcp, 10, 1)));
        }
        if version >= CodeObjectVersion::V5 {
            d.push(("uses_dynamic_stack", f(kcp, 11, 1)));
        }
        if self.kernarg_preload_length() != 0 {
            d.push((
                "user_sgpr_kernarg_preload_length",
                u64::from(self.kernarg_preload_length()),
            ));
        }
        if self.kernarg_preload_offset() != 0 {
            d.push((
                "user_sgpr_kernarg_preload_offset",
                u64::from(self.kernarg_preload_offset()),
            ));
        }
        d
    }
}

/// Register allocation of a kernel as implied by its descriptor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RegisterCounts {
    /// VGPRs allocated per work-item: (granulated count + 1) * encoding granule. On the gfx90a
    /// family this is the unified file: architected VGPRs followed by AGPRs.
    pub vgprs_allocated: u32,
    /// Architected VGPRs (`accum_offset` on the gfx90a family; all VGPRs elsewhere).
    pub arch_vgprs: u32,
    /// AGPRs in the unified file (gfx90a family): `vgprs_allocated - accum_offset`; 0 elsewhere.
    pub agprs: u32,
    /// SGPRs allocated per wave ((granulated + 1) * 8); `None` on gfx10+, where the field is
    /// ignored and every wave gets the full SGPR file.
    pub sgprs: Option<u32>,
    /// Wave32 (descriptor bit 10).
    pub wave32: bool,
}

/// SGPR encoding granule of `GRANULATED_WAVEFRONT_SGPR_COUNT` (LLVM `getSGPREncodingGranule`: 8).
pub const SGPR_ENCODING_GRANULE: u32 = 8;

/// True when the target has architected flat scratch (LLVM `FeatureArchitectedFlatScratch`:
/// gfx940 family and gfx11+); such targets use `enable_private_segment` instead of the
/// private segment buffer / flat scratch init user SGPRs.
pub fn has_architected_flat_scratch(target: &Target) -> bool {
    matches!(
        target.processor.as_str(),
        "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic"
    ) || target.generation() >= Generation::Gfx11
}

/// VGPR encoding granule of `GRANULATED_WORKITEM_VGPR_COUNT` (LLVM `getVGPREncodingGranule`):
/// 8 on the gfx90a family; 16/8 (wave32/wave64) on gfx12.5 (1024 addressable VGPRs; checked
/// against llvm-objdump-22); else 8 in wave32 and 4 in wave64.
pub fn vgpr_encoding_granule(target: &Target, wave32: bool) -> u32 {
    if target.generation() == Generation::Gfx125 {
        if wave32 {
            16
        } else {
            8
        }
    } else if target.has_gfx90a_insts() || wave32 {
        8
    } else {
        4
    }
}

/// VGPR allocation granule (LLVM `getVGPRAllocGranule`): 8 on the gfx90a family; 24/12
/// (wave32/wave64) on targets with 1.5x VGPRs; 8/4 on gfx10+; 4 before. gfx12.5 uses its
/// encoding granule (not verified against hardware documentation).
pub fn vgpr_alloc_granule(target: &Target, wave32: bool) -> u32 {
    if target.generation() == Generation::Gfx125 {
        vgpr_encoding_granule(target, wave32)
    } else if target.has_gfx90a_insts() {
        8
    } else if target.has_1_5x_vgprs() {
        if wave32 {
            24
        } else {
            12
        }
    } else if target.generation() >= Generation::Gfx10 {
        if wave32 {
            8
        } else {
            4
        }
    } else {
        4
    }
}

/// Physical VGPRs per SIMD lane slice (LLVM `getTotalNumVGPRs`): 512 on the gfx90a family;
/// 1536/768 (wave32/wave64) with 1.5x VGPRs; 1024/512 on gfx10+; 256 before.
pub fn total_vgprs(target: &Target, wave32: bool) -> u32 {
    if target.has_gfx90a_insts() {
        512
    } else if target.has_1_5x_vgprs() {
        if wave32 {
            1536
        } else {
            768
        }
    } else if target.generation() >= Generation::Gfx10 {
        if wave32 {
            1024
        } else {
            512
        }
    } else {
        256
    }
}

/// Most VGPRs one wave can have (LLVM `getAddressableNumVGPRs`): 512 on the gfx90a family
/// (256 architected plus 256 accumulation registers), 1024 on gfx12.5 (its addressable
/// architected VGPRs, as [`vgpr_encoding_granule`]), else 256. A descriptor or metadata note
/// giving a kernel more is inconsistent ([`crate::CodeObject::input_warnings`]).
pub fn max_vgprs_per_wave(target: &Target) -> u32 {
    if target.has_gfx90a_insts() {
        512
    } else if target.generation() == Generation::Gfx125 {
        1024
    } else {
        256
    }
}

/// Maximum waves per SIMD (LLVM `getMaxWavesPerEU`): 8 on the gfx90a family, 10 before gfx10,
/// 20 on gfx10.1, 16 on gfx10.3+.
pub fn max_waves_per_simd(target: &Target) -> u32 {
    let p = target.processor.as_str();
    if target.has_gfx90a_insts() {
        8
    } else if target.generation() < Generation::Gfx10 {
        10
    } else if target.generation() == Generation::Gfx10
        && (p.starts_with("gfx101") || p == "gfx10-1-generic")
    {
        20
    } else {
        16
    }
}

/// Granulated VGPR field value for `vgprs` registers: `ceil(max(vgprs,1) / granule) - 1` with the
/// encoding granule of [`vgpr_encoding_granule`] (on the gfx90a family pass arch VGPRs rounded to
/// 4 plus AGPRs).
pub fn vgprs_to_granules(target: &Target, wave32: bool, vgprs: u32) -> u32 {
    let g = vgpr_encoding_granule(target, wave32);
    vgprs.max(1).div_ceil(g) - 1
}

/// Granulated SGPR field value for `sgprs` (including VCC, FLAT_SCRATCH, XNACK_MASK when used):
/// `ceil(max(sgprs,1) / 8) - 1` (gfx6..gfx9; must be 0 on gfx10+).
pub fn sgprs_to_granules(target: &Target, sgprs: u32) -> u32 {
    if target.generation() >= Generation::Gfx10 {
        0
    } else {
        sgprs.max(1).div_ceil(SGPR_ENCODING_GRANULE) - 1
    }
}

/// Occupancy estimate for one kernel: waves per SIMD as limited by registers, and workgroups per
/// CU as limited by LDS.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Occupancy {
    /// Waves per SIMD limited by VGPRs (LLVM `getNumWavesPerEUWithNumVGPRs`).
    pub by_vgprs: u32,
    /// Waves per SIMD limited by SGPRs (gfx6..gfx9: 800 SGPRs per SIMD, 16-register granule;
    /// gfx6/7 512, 8; LLVM `getOccupancyWithNumSGPRs`); `None` on gfx10+.
    pub by_sgprs: Option<u32>,
    /// Hardware maximum ([`max_waves_per_simd`]).
    pub max_waves: u32,
    /// Resulting waves per SIMD: min of the above.
    pub waves_per_simd: u32,
    /// Workgroups per CU (WGP in WGP mode) that fit in LDS, `None` when the kernel uses no LDS.
    pub workgroups_by_lds: Option<u32>,
}

/// LDS per CU in bytes (AMDGPUUsage "Memory Spaces"/processor table: 64 KiB up to gfx942,
/// 160 KiB gfx950, 64 KiB per CU on gfx10+ (128 KiB per WGP), 320 KiB gfx1250).
pub fn lds_bytes_per_cu(target: &Target) -> u32 {
    match target.processor.as_str() {
        "gfx950" => 160 * 1024,
        p if p.starts_with("gfx125") => 320 * 1024,
        _ => 64 * 1024,
    }
}

/// Computes [`Occupancy`] for `vgprs` allocated VGPRs (unified count on gfx90a), `sgprs`
/// (ignored on gfx10+) and `lds` bytes of group segment.
pub fn occupancy(target: &Target, wave32: bool, vgprs: u32, sgprs: u32, lds: u32) -> Occupancy {
    let max_waves = max_waves_per_simd(target);
    let granule = vgpr_alloc_granule(target, wave32);
    let v = vgprs.max(1).div_ceil(granule) * granule;
    let by_vgprs = (total_vgprs(target, wave32) / v).clamp(1, max_waves);
    let by_sgprs = match target.generation() {
        Generation::Gfx6 | Generation::Gfx7 => {
            Some((512 / (sgprs.max(1).div_ceil(8) * 8)).clamp(1, max_waves))
        }
        Generation::Gfx8 | Generation::Gfx9 => {
            Some((800 / (sgprs.max(1).div_ceil(16) * 16)).clamp(1, max_waves))
        }
        _ => None,
    };
    let waves = by_vgprs.min(by_sgprs.unwrap_or(max_waves)).min(max_waves);
    let workgroups_by_lds = lds_bytes_per_cu(target).checked_div(lds);
    Occupancy {
        by_vgprs,
        by_sgprs,
        max_waves,
        waves_per_simd: waves,
        workgroups_by_lds,
    }
}
