//! Operand shapes of image instructions (MIMG on gfx9/gfx10/gfx11, VIMAGE/VSAMPLE on gfx12+):
//! how many VGPRs `vdata` and the address operands span, as LLVM's disassembler decodes them.
//!
//! The encodings do not state the register widths. LLVM decodes one "disassembler" variant
//! per opcode and then re-selects the variant from `dmask`, `d16`, `tfe`, `dim` and `a16`
//! (`AMDGPUDisassembler::convertMIMGInst`, address count from `AMDGPU::getAddrSizeMIMGOp` in
//! `AMDGPUBaseInfo.cpp`, variant lists from `MIMGInstructions.td`). When no variant fits, or
//! the widened tuple would pass v255, LLVM keeps the decoded variant; this module follows
//! the same rules so that `reads()`/`writes()` name exactly the VGPRs LLVM's text names.
use crate::decode::Instruction;
use crate::regs::RegSet;
use crate::{Family, Format};

/// Most address operands an image instruction prints (gfx10 NSA: vaddr0 + 3 extra dwords of
/// 4 addresses each).
pub(crate) const MAX_ADDRS: usize = 13;

/// Encoded modifier bits of an image instruction (ISA manuals, MIMG/VIMAGE/VSAMPLE microcode
/// formats; positions checked against `llvm-mc-22 -show-encoding`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ImageBits {
    pub dmask: u32,
    /// `dim` field (gfx10+): 0 = 1D .. 7 = 2D_MSAA_ARRAY (`SQ_RSRC_IMG_*`).
    pub dim: Option<u32>,
    pub unorm: bool,
    pub glc: bool,
    pub slc: bool,
    pub dlc: bool,
    /// gfx9: printed `a16` (LLVM FeatureR128A16); gfx10+: `r128`.
    pub r128: bool,
    pub a16: bool,
    pub tfe: bool,
    pub lwe: bool,
    /// gfx9 `da` (array) bit.
    pub da: bool,
    pub d16: bool,
    /// gfx90a/gfx94x: bit 16 selects AGPRs for `vdata` (LLVM `MIMGe_gfx90a`; no `tfe`).
    pub acc: bool,
    /// gfx12 `nv` bit (dword0 bit 7).
    pub nv: bool,
    /// gfx12 temporal hint (dword1 bits 22:20) and scope (dword1 bits 19:18).
    pub th: u32,
    pub scope: u32,
    /// gfx10/gfx11 MIMG: NSA (non-sequential address) encoding in use.
    pub nsa: bool,
}

/// What the opcode's LLVM base opcode (`MIMGBaseOpcode`) says about its operands.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BaseInfo {
    /// Sampler instruction (has `ssamp`): image_sample*, image_gather4*, image_get_lod.
    pub sampler: bool,
    /// Data size is 4 dwords regardless of dmask (gather4, msaa_load: LLVM `Gather4` flag).
    pub gather: bool,
    pub store: bool,
    pub atomic: bool,
    /// (f)cmpswap: data and compare value (LLVM `AtomicX2`).
    pub cmpswap: bool,
    /// Extra 32-bit address arguments: offset, bias, z-compare (`NumExtraArgs`).
    pub extra: u32,
    pub gradients: bool,
    pub g16: bool,
    pub coordinates: bool,
    /// LOD, clamp or mip level (`LodOrClampOrMip`).
    pub lod: bool,
}

impl BaseInfo {
    /// Base opcode facts from the mnemonic (LLVM `MIMGInstructions.td`: `MIMG_Sampler`
    /// variants `_c` z-compare, `_o` offset, `_b` bias (extra arguments), `_d`/`_cd`
    /// gradients, `_g16` 16-bit gradients, `_l`/`_cl` LOD/clamp, `_lz` none; `MIMG_NoSampler`
    /// `_mip`; `image_get_resinfo` has no coordinates, only the mip level). `None` for BVH
    /// ray-intersection instructions, whose operands have fixed widths.
    pub fn of(m: &str, gfx11_plus: bool) -> Option<BaseInfo> {
        if m.contains("bvh") || !m.starts_with("image_") {
            return None;
        }
        let mut b = BaseInfo {
            sampler: false,
            gather: false,
            store: m.starts_with("image_store"),
            atomic: m.starts_with("image_atomic"),
            cmpswap: m.contains("cmpswap"),
            extra: 0,
            gradients: false,
            g16: false,
            coordinates: true,
            lod: m.contains("_mip"),
        };
        if m == "image_get_resinfo" {
            b.coordinates = false;
            b.lod = true;
        } else if m == "image_msaa_load" {
            // gfx11+ MIMG_MSAA_Load sets Gather4 ("for appropriate dmask handling"); gfx10
            // defines it as a plain MIMG_NoSampler.
            b.gather = gfx11_plus;
        } else if m == "image_get_lod" {
            b.sampler = true;
        } else if let Some(rest) = m
            .strip_prefix("image_gather4h")
            .or_else(|| m.strip_prefix("image_gather4"))
            .or_else(|| m.strip_prefix("image_sample"))
        {
            b.sampler = true;
            b.gather = m.starts_with("image_gather4");
            for t in rest.split('_') {
                match t {
                    "c" | "o" | "b" => b.extra += 1,
                    "d" | "cd" => b.gradients = true,
                    "g16" => b.g16 = true,
                    "l" | "cl" => b.lod = true,
                    _ => {}
                }
            }
        }
        Some(b)
    }

    /// Address sizes (dwords) LLVM defines variants for: samplers
    /// `MIMG_Sampler_AddrSizes` (1..=3, gradients 2..=9, G16 gradients 2..=7; one more with
    /// LOD/clamp; plus the extra arguments), all others 1..=4.
    fn addr_range(&self) -> (u32, u32) {
        if !self.sampler {
            return (1, 4);
        }
        let (lo, hi) = match (self.gradients, self.g16) {
            (true, true) => (2, 7),
            (true, false) => (2, 9),
            _ => (1, 3),
        };
        (lo + self.extra, hi + u32::from(self.lod) + self.extra)
    }

    /// Is `size` a plain (non-NSA) address size with a variant? Samplers: the register
    /// classes `MIMG_Sampler_AddrSizes.MachineInstrs` generates (V4 also covers 3 words, V8
    /// covers 5..=8, V16 covers 13..=16); others 1..=4.
    fn plain_addr_ok(&self, size: u32) -> bool {
        let (lo, hi) = self.addr_range();
        let any = |a: u32, b: u32| a.max(lo) <= b.min(hi);
        if !self.sampler {
            return (1..=4).contains(&size);
        }
        match size {
            4 => any(3, 4),
            8 => any(5, 8),
            16 => any(13, 16),
            _ => any(size, size),
        }
    }

    /// Data sizes (dwords) LLVM defines variants for, and the size of the decoded variant.
    fn vdata_sizes(&self) -> (&'static [u32], u32) {
        if self.cmpswap {
            (&[2, 3, 4, 5], 2)
        } else if self.atomic {
            (&[1, 2, 3], 1)
        } else if self.gather && self.sampler {
            // MIMG_Gather: _V2 (packed d16, the decoded one), _V4, _V5 (tfe).
            (&[2, 4, 5], 2)
        } else if self.gather {
            // gfx11+ image_msaa_load (MIMG_MSAA_Load): _V2.._V5, decoded as _V4.
            (&[2, 3, 4, 5], 4)
        } else {
            (&[1, 2, 3, 4, 5], 1)
        }
    }
}

/// Dimension facts of `dim` (LLVM `AMDGPUDimProps` in SIInstrInfo.td / `MIMGDimInfo`):
/// (address coordinates incl. slice/face/fragment, gradient count).
fn dim_info(dim: u32) -> (u32, u32) {
    match dim {
        0 => (1, 2), // 1D
        1 => (2, 4), // 2D
        2 => (3, 6), // 3D
        3 => (3, 4), // CUBE
        4 => (2, 2), // 1D_ARRAY
        5 => (3, 4), // 2D_ARRAY
        6 => (3, 4), // 2D_MSAA
        _ => (4, 4), // 2D_MSAA_ARRAY
    }
}

/// Register shape of an image instruction as LLVM decodes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ImageShape {
    pub info: BaseInfo,
    pub bits: ImageBits,
    /// First `vdata` VGPR and width in dwords.
    pub vdata: (u16, u8),
    /// Address operands: first VGPR and width in dwords; `n_addrs` are used.
    pub addrs: [(u16, u8); MAX_ADDRS],
    pub n_addrs: usize,
    /// Addresses are printed as a `[...]` list (NSA / gfx12 with more than one operand).
    pub bracket: bool,
    /// `srsrc` scalar operand encoding (8 dwords) and `ssamp` (4 dwords, samplers).
    pub srsrc: u32,
    pub ssamp: Option<u32>,
}

impl Instruction {
    /// Modifier bits of an image instruction, by family layout.
    pub(crate) fn image_bits(&self) -> ImageBits {
        let w0 = self.word(0);
        let w1 = self.word(1);
        let b0 = |n: u32| w0 & (1 << n) != 0;
        let b1 = |n: u32| w1 & (1 << n) != 0;
        let mut b = ImageBits::default();
        match (self.target.family(), self.fmt.format) {
            (Family::Gfx9, _) => {
                b.dmask = (w0 >> 8) & 0xf;
                b.unorm = b0(12);
                b.glc = b0(13);
                b.da = b0(14);
                b.r128 = b0(15);
                if self.acc_target() {
                    b.acc = b0(16);
                } else {
                    b.tfe = b0(16);
                }
                b.lwe = b0(17);
                b.slc = b0(25);
                b.d16 = b1(31);
            }
            (Family::Gfx10, _) => {
                b.nsa = (w0 >> 1) & 3 != 0;
                b.dim = Some((w0 >> 3) & 7);
                b.dlc = b0(7);
                b.dmask = (w0 >> 8) & 0xf;
                b.unorm = b0(12);
                b.glc = b0(13);
                b.r128 = b0(15);
                b.tfe = b0(16);
                b.lwe = b0(17);
                b.slc = b0(25);
                b.a16 = b1(30);
                b.d16 = b1(31);
            }
            (Family::Gfx11, _) => {
                b.nsa = b0(0);
                b.dim = Some((w0 >> 2) & 7);
                b.unorm = b0(7);
                b.dmask = (w0 >> 8) & 0xf;
                b.slc = b0(12);
                b.dlc = b0(13);
                b.glc = b0(14);
                b.r128 = b0(15);
                b.a16 = b0(16);
                b.d16 = b0(17);
                b.tfe = b1(21);
                b.lwe = b1(22);
            }
            (_, fmt) => {
                b.dim = Some(w0 & 7);
                b.r128 = b0(4);
                b.d16 = b0(5);
                b.a16 = b0(6);
                b.nv = b0(7);
                b.dmask = (w0 >> 22) & 0xf;
                b.scope = (w1 >> 18) & 3;
                b.th = (w1 >> 20) & 7;
                if fmt == Format::Vsample {
                    b.tfe = b0(3);
                    b.unorm = b0(13);
                    b.lwe = b1(8);
                } else {
                    b.tfe = b1(23);
                }
            }
        }
        b
    }

    /// VGPR/SGPR shape of an image instruction (`None` for other formats and BVH).
    pub(crate) fn image_shape(&self) -> Option<ImageShape> {
        if !matches!(
            self.fmt.format,
            Format::Mimg | Format::Vimage | Format::Vsample
        ) {
            return None;
        }
        let info = BaseInfo::of(self.mnemonic(), self.target.family() >= Family::Gfx11)?;
        let bits = self.image_bits();
        let fam = self.target.family();
        let w1 = self.word(1);
        let gfx12 = fam >= Family::Gfx12;
        // Raw fields: vdata, address VGPRs (in operand order), srsrc, ssamp.
        let mut raw = [0u16; MAX_ADDRS];
        let (vdata, n_raw, srsrc, ssamp) = if gfx12 {
            let w2 = self.word(2);
            for (i, r) in raw.iter_mut().take(4).enumerate() {
                *r = ((w2 >> (8 * i)) & 0xff) as u16;
            }
            (w1 & 0xff, 4, (w1 >> 9) & 0x1ff, (w1 >> 23) & 0x1ff)
        } else {
            raw[0] = (w1 & 0xff) as u16;
            let extra_dwords = if !bits.nsa {
                0
            } else if fam == Family::Gfx10 {
                (self.word(0) >> 1) & 3
            } else {
                1
            };
            let mut n = 1;
            for d in 0..extra_dwords as usize {
                let w = self.word(2 + d);
                for k in 0..4 {
                    if n < MAX_ADDRS {
                        raw[n] = ((w >> (8 * k)) & 0xff) as u16;
                        n += 1;
                    }
                }
            }
            let ssamp = if fam == Family::Gfx11 {
                (w1 >> 26) & 0x1f
            } else {
                (w1 >> 21) & 0x1f
            };
            ((w1 >> 8) & 0xff, n, ((w1 >> 16) & 0x1f) * 4, ssamp * 4)
        };
        let nsa = gfx12 || bits.nsa;
        let (lo, hi) = info.addr_range();
        // The decoded variant's address count (MIMG_Sampler_AddrSizes: the smallest size for
        // the plain encoding; for NSA the largest size of the group of the encoded NSA dword
        // count: gfx10 2..=5, 6..=9, 10..=12 addresses; gfx11 2..=5; gfx12 1..=4).
        let a_dec = if !nsa {
            if fam == Family::Gfx9 {
                // gfx9 never re-sizes the address: the decoded variant's width.
                self.row
                    .operands
                    .iter()
                    .find(|o| {
                        self.fmt
                            .fields
                            .get(usize::from(o.field))
                            .is_some_and(|f| f.name == "vaddr")
                    })
                    .map_or(1, |o| u32::from(o.width.max(1)))
            } else {
                lo
            }
        } else {
            // NSA groups by extra dword count (MIMG_Sampler_AddrSizes.NSAInstrs): 2..=5,
            // 6..=9, 10..=12.
            let (glo, ghi) = if gfx12 {
                (1, 4)
            } else {
                let g = (n_raw as u32 - 2) / 4;
                (4 * g + 2, (4 * g + 5).min(12))
            };
            hi.min(ghi).max(glo.max(lo))
        };
        let (sizes, v_dec) = info.vdata_sizes();
        let a_dec = if nsa {
            a_dec.min(n_raw as u32).max(1)
        } else {
            a_dec
        };
        // The decoded variant: NSA operands are single VGPRs, the plain address one tuple.
        let mut addrs = [(0u16, 1u8); MAX_ADDRS];
        let mut n_addrs = if nsa {
            for (a, r) in addrs.iter_mut().zip(raw.iter()) {
                a.0 = *r;
            }
            a_dec as usize
        } else {
            addrs[0] = (raw[0], a_dec as u8);
            1
        };
        let mut vd = (vdata as u16, v_dec as u8);
        // Data size from dmask (gather: always 4), packed d16 halves it, tfe adds a dword.
        let mut dst = if info.gather {
            4
        } else {
            bits.dmask.count_ones().max(1)
        };
        if bits.d16 {
            dst = dst.div_ceil(2);
        }
        if bits.tfe {
            dst += 1;
        }
        let size = if fam == Family::Gfx9 {
            a_dec
        } else {
            let size = self.image_addr_dwords(&info, &bits);
            if !nsa && size > 12 {
                16
            } else {
                size
            }
        };
        // NSA with more addresses than decoded: gfx11+ widen the last operand ("partial
        // NSA"); gfx10 keeps the decoded variant.
        let partial = nsa && size > a_dec;
        let size_ok = if nsa {
            (lo..=hi).contains(&size) && (size >= 2 || gfx12)
        } else {
            info.plain_addr_ok(size)
        };
        let change = !(dst == v_dec && size == a_dec);
        let keep = (partial && fam == Family::Gfx10) || !sizes.contains(&dst) || !size_ok;
        if change && !keep {
            let vdata_fits = dst == v_dec || u32::from(vd.0) + dst <= 256;
            let addr_fits = if size == a_dec {
                true
            } else if !nsa {
                u32::from(raw[0]) + size <= 256
            } else if partial {
                u32::from(raw[a_dec as usize - 1]) + size - (a_dec - 1) <= 256
            } else {
                true
            };
            if vdata_fits && addr_fits {
                vd.1 = dst as u8;
                if !nsa {
                    addrs[0].1 = size as u8;
                } else if partial {
                    addrs[a_dec as usize - 1].1 = (size - (a_dec - 1)) as u8;
                } else {
                    n_addrs = size as usize;
                }
            }
        }
        Some(ImageShape {
            info,
            bits,
            vdata: vd,
            addrs,
            n_addrs,
            bracket: nsa && n_addrs > 1,
            srsrc,
            ssamp: info.sampler.then_some(ssamp),
        })
    }

    /// Address dwords the opcode needs for its `dim`/`a16` (LLVM `getAddrSizeMIMGOp`): the
    /// extra arguments, the coordinates plus LOD/clamp/mip (packed in pairs with a16), and the
    /// gradients (packed in pairs by the `_g16` opcodes).
    fn image_addr_dwords(&self, info: &BaseInfo, bits: &ImageBits) -> u32 {
        let (coords, grads) = dim_info(bits.dim.unwrap_or(0));
        let comps = if info.coordinates { coords } else { 0 } + u32::from(info.lod);
        let mut size = info.extra + if bits.a16 { comps.div_ceil(2) } else { comps };
        if info.gradients {
            // LLVM packs a16 gradients only where G16 is missing; every gfx10+ target decodes
            // as G16-capable (gfx1010 checked with llvm-mc-22), so only the _g16 opcodes pack.
            size += if info.g16 {
                (grads / 2).next_multiple_of(2)
            } else {
                grads
            };
        }
        size
    }

    /// gfx90a/gfx94x/gfx950 MIMG: dword0 bit 16 is `acc` (AGPR data), not `tfe`.
    fn acc_target(&self) -> bool {
        let n = self.target.name();
        n == "gfx90a" || n.starts_with("gfx94") || n.starts_with("gfx95") || n == "gfx9-4-generic"
    }
}

impl ImageShape {
    /// Adds the explicit registers read (`defs == false`: addresses, `srsrc`, `ssamp`, and
    /// `vdata` of stores and atomics) or written (`defs == true`: `vdata` of everything but
    /// stores; atomics write their data operand back, LLVM `$vdst = $vdata`).
    pub(crate) fn add_regs(&self, sregs: &[&str; 256], defs: bool, set: &mut RegSet) {
        let data = if defs {
            !self.info.store
        } else {
            self.info.store || self.info.atomic
        };
        if data {
            for i in 0..u16::from(self.vdata.1) {
                if self.bits.acc {
                    set.add_agpr(self.vdata.0 + i);
                } else {
                    set.add_vgpr(self.vdata.0 + i);
                }
            }
        }
        if defs {
            return;
        }
        for &(r, w) in &self.addrs[..self.n_addrs] {
            (0..u16::from(w)).for_each(|i| set.add_vgpr(r + i));
        }
        set.add_scalar(sregs, self.srsrc as u16, 8);
        if let Some(s) = self.ssamp {
            set.add_scalar(sregs, s as u16, 4);
        }
    }
}
