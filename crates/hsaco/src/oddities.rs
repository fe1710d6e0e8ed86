//! Fields of a code object that no specification allows but that nothing depends on: kept as
//! they are by every rewrite, and named as warnings so that an odd input is not taken in
//! silently (session-20 fresh tester). AMD ships inputs with odd fields; none of these is
//! refused.

use crate::codeobject::CodeObject;
use crate::elf;

/// `SHT_REL` (System V gABI "Sections"): relocations without addends.
const SHT_REL: u32 = 9;
/// `SHT_HASH` (System V gABI "Sections"): a symbol hash table of 4-byte words.
const SHT_HASH: u32 = 5;

/// `e_flags` bits a code object v4+ defines (AMDGPUUsage, "AMDGPU ELF Header e_flags for Code
/// Object V4 and After"): `EF_AMDGPU_MACH` (0x0ff), `EF_AMDGPU_FEATURE_XNACK_V4` (0x300),
/// `EF_AMDGPU_FEATURE_SRAMECC_V4` (0xc00) and `EF_AMDGPU_GENERIC_VERSION` (0xff000000).
pub const KNOWN_E_FLAGS: u32 = 0xff00_0fff;

/// The reserved ranges of a kernel descriptor (offset, name), from AMDGPUUsage "Kernel
/// Descriptor" (LLVM `AMDHSAKernelDescriptor.h`): reserved, must be 0. Their bytes are
/// [`crate::KernelDescriptor`]'s `reserved0`, `reserved1` and `reserved3`.
pub const KD_RESERVED: [(u64, &str); 3] = [
    (0x0c, "reserved0"),
    (0x18, "reserved1"),
    (0x3c, "reserved3"),
];

impl CodeObject {
    /// Every odd field of the object, one sentence each naming the kernel (when there is one)
    /// and the file offset: non-zero reserved kernel descriptor bytes, `e_flags` bits no code
    /// object version defines, a `PT_NOTE` segment whose `p_memsz` differs from its `p_filesz`,
    /// a metadata kernel whose `.symbol` names no symbol of the object, a metadata note and a
    /// descriptor that disagree on the kernarg segment or wave size, kernels without any
    /// metadata note, an ELF version other than 1, an `xnack` or `sramecc` setting on a
    /// processor without that feature, a descriptor or note giving a kernel more VGPRs than
    /// a wave can have, and a table section whose `sh_entsize` is not its entry size. Each is
    /// kept as it is by a rewrite.
    pub fn input_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let flags = self.elf.header.e_flags;
        if flags & !KNOWN_E_FLAGS != 0 {
            out.push(format!(
                "e_flags {flags:#x} at offset 0x30 has bits {:#x} that no code object version defines (kept as they are)",
                flags & !KNOWN_E_FLAGS
            ));
        }
        out.extend(self.header_oddities());
        out.extend(self.odd_entry_sizes());
        for k in &self.kernels {
            let d = &k.descriptor;
            let fields: [&[u8]; 3] = [&d.reserved0, &d.reserved1, &d.reserved3];
            for ((at, field), bytes) in KD_RESERVED.into_iter().zip(fields) {
                if let Some(first) = bytes.iter().position(|&b| b != 0) {
                    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                    out.push(format!(
                        "kernel {}: descriptor {}.kd at offset {:#x}: {field} (offset {:#x}, {} bytes) must be zero but holds {} (first non-zero byte at offset {:#x}; kept as they are)",
                        k.name,
                        k.name,
                        k.kd_offset,
                        k.kd_offset + at,
                        bytes.len(),
                        hex.join(" "),
                        k.kd_offset + at + first as u64
                    ));
                }
            }
        }
        out.extend(self.note_descriptor_disagreements());
        out.extend(self.vgprs_beyond_a_wave());
        if self.metadata.is_empty() && !self.kernels.is_empty() {
            out.push(format!(
                "no NT_AMDGPU_METADATA note: the loader finds no metadata for the {} kernel(s) (kept as it is)",
                self.kernels.len()
            ));
        }
        let h = &self.elf.header;
        for (i, p) in self.elf.segments.iter().enumerate() {
            if p.p_type == elf::PT_NOTE && p.memsz != p.filesz {
                out.push(format!(
                    "program header [{i}] at offset {:#x}: PT_NOTE p_memsz {:#x} differs from p_filesz {:#x} (kept as they are)",
                    h.phdr_offset(i),
                    p.memsz,
                    p.filesz
                ));
            }
        }
        // A set: objects hold tens of thousands of kernels and symbols.
        let names: std::collections::HashSet<&str> = self
            .symbols
            .iter()
            .map(|s| s.symbol.name.as_str())
            .collect();
        for m in &self.metadata {
            for i in 0..m.kernel_count() {
                let Some(sym) = m.kernel_value(i, ".symbol").and_then(|v| v.as_str()) else {
                    continue;
                };
                if !names.contains(sym) {
                    let name = m.kernel_value(i, ".name").and_then(|v| v.as_str());
                    out.push(format!(
                        "kernel {}: metadata note at offset {:#x}: amdhsa.kernels[{i}] .symbol {sym:?} names no symbol of the object (kept as it is)",
                        name.unwrap_or(sym),
                        m.offset
                    ));
                }
            }
        }
        out
    }

    /// ELF header fields the loader does not check: `e_ident[EI_VERSION]` and `e_version` other
    /// than 1 (`EV_CURRENT`, System V gABI "ELF Header"), and an `xnack` or `sramecc` setting in
    /// `e_flags` on a processor without that feature, where the field must be 0 (AMDGPUUsage
    /// "AMDGPU ELF Header e_flags for Code Object V4 and After").
    fn header_oddities(&self) -> Vec<String> {
        let mut out = Vec::new();
        let ident_version = self.bytes.get(6).copied().unwrap_or(1);
        if ident_version != 1 {
            out.push(format!(
                "e_ident[EI_VERSION] at offset 0x6 is {ident_version}, not 1 (EV_CURRENT) (kept as it is)"
            ));
        }
        let version = self
            .bytes
            .get(0x14..0x18)
            .map_or(1, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if version != 1 {
            out.push(format!(
                "e_version at offset 0x14 is {version}, not 1 (EV_CURRENT) (kept as it is)"
            ));
        }
        let t = &self.target;
        let flags = self.elf.header.e_flags;
        for (name, setting, supported, shift) in [
            ("xnack", t.xnack, t.supports_xnack(), 8),
            ("sramecc", t.sramecc, t.supports_sramecc(), 10),
        ] {
            if !supported && setting != crate::target::FeatureSetting::Unsupported {
                out.push(format!(
                    "e_flags {flags:#x} at offset 0x30 sets {name} to {} ({:#x}) but {} has no {name} feature, where the field must be 0 (kept as it is)",
                    (flags >> shift) & 3,
                    flags & (3 << shift),
                    t.processor
                ));
            }
        }
        out
    }

    /// Table sections whose `sh_entsize` is not the size of their entries (System V gABI
    /// "Sections" and the ELF64 structure sizes: `Elf64_Sym` and `Elf64_Rela` 24 bytes,
    /// `Elf64_Rel` and `Elf64_Dyn` 16, `SHT_HASH` words 4, `SHT_RELR` entries 8; session-25 fresh
    /// tester: copied without a word, and llvm-objdump-22 then refuses input and output alike).
    /// `hsaco` reads these tables by their types' entry sizes, not by this field.
    fn odd_entry_sizes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let h = &self.elf.header;
        for s in &self.elf.sections {
            let want = match s.sh_type {
                elf::SHT_SYMTAB | elf::SHT_DYNSYM | elf::SHT_RELA => 24,
                SHT_REL | elf::SHT_DYNAMIC => 16,
                elf::SHT_RELR => 8,
                SHT_HASH => 4,
                _ => continue,
            };
            if s.entsize != want {
                let header = h.e_shoff + u64::from(h.e_shentsize) * s.index as u64;
                out.push(format!(
                    "section {} (section header [{}] at offset {header:#x}): sh_entsize {} at offset {:#x} is not {want}, the size of its entries (kept as it is; llvm-objdump-22 refuses such a table)",
                    s.name,
                    s.index,
                    s.entsize,
                    header + 56
                ));
            }
        }
        out
    }

    /// Kernels given more VGPRs than one wave can have on the target
    /// ([`crate::kd::max_vgprs_per_wave`]): by the descriptor's
    /// `GRANULATED_WORKITEM_VGPR_COUNT` (`compute_pgm_rsrc1` bits 0..5, descriptor offset 0x30;
    /// 6 bits of 8-register granules encode up to 512 in wave32) or by the note's `.vgpr_count`
    /// (session-23 fresh tester). The hardware cannot launch such a wave.
    fn vgprs_beyond_a_wave(&self) -> Vec<String> {
        let max = crate::kd::max_vgprs_per_wave(&self.target);
        let processor = &self.target.processor;
        let mut out = Vec::new();
        for k in &self.kernels {
            let allocated = k.descriptor.registers(&self.target).vgprs_allocated;
            if allocated > max {
                out.push(format!(
                    "kernel {}: descriptor {}.kd at offset {:#x}: GRANULATED_WORKITEM_VGPR_COUNT {} (compute_pgm_rsrc1 at offset {:#x}) allocates {allocated} VGPRs, more than the {max} a wave can have on {processor} (kept as it is)",
                    k.name,
                    k.name,
                    k.kd_offset,
                    k.descriptor.granulated_vgpr_count(),
                    k.kd_offset + 0x30
                ));
            }
            let Some((m, i)) = self.kernel_metadata(k) else {
                continue;
            };
            match m.kernel_u64(i, ".vgpr_count") {
                Some(v) if v > u64::from(max) => out.push(format!(
                    "kernel {}: metadata note at offset {:#x}: .vgpr_count {v} is more than the {max} VGPRs a wave can have on {processor} (kept as it is)",
                    k.name, m.offset
                )),
                _ => {}
            }
        }
        out
    }

    /// Kernels whose metadata note and descriptor disagree on what both state and no rewrite
    /// changes: the kernarg segment size (`.kernarg_segment_size` vs a non-zero `kernarg_size`) and the
    /// wave size (`.wavefront_size` vs `ENABLE_WAVEFRONT_SIZE32`, bit 10 of
    /// `kernel_code_properties`; AMDGPUUsage "Code Object V3 Metadata" and "Kernel
    /// Descriptor"). A set reserved bit 10 on gfx9, which has no wave32, shows here too.
    fn note_descriptor_disagreements(&self) -> Vec<String> {
        let mut out = Vec::new();
        for k in &self.kernels {
            let Some((m, i)) = self.kernel_metadata(k) else {
                continue;
            };
            let d = &k.descriptor;
            for (key, field, desc, at) in [
                (
                    ".kernarg_segment_size",
                    "kernarg_size",
                    d.kernarg_size,
                    0x08,
                ),
                (
                    ".wavefront_size",
                    "kernel_code_properties (wave size)",
                    d.wave_size(),
                    0x38,
                ),
            ] {
                match m.kernel_u64(i, key) {
                    // A `kernarg_size` of 0 is what hand-written assembly without
                    // `.amdhsa_kernarg_size` gets (as Tensile's and our fixtures'): not warned.
                    Some(v) if v != u64::from(desc) && desc != 0 => out.push(format!(
                        "kernel {}: metadata note at offset {:#x}: {key} {v} disagrees with descriptor {}.kd's {field} {desc} at offset {:#x} (both kept as they are)",
                        k.name,
                        m.offset,
                        k.name,
                        k.kd_offset + at
                    )),
                    _ => {}
                }
            }
        }
        out
    }
}
