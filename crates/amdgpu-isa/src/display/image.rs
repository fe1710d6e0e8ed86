//! Text of image instructions (MIMG, VIMAGE, VSAMPLE) as LLVM's `AMDGPUInstPrinter` prints
//! them: operands from [`crate::image`] shapes, then the modifiers in the order of LLVM's
//! asm strings (`MIMGInstructions.td`): gfx9 `dmask unorm glc slc a16 tfe lwe da d16`,
//! gfx10/gfx11 `dmask dim unorm glc slc dlc r128 a16 tfe lwe d16`, gfx12
//! `dmask dim unorm th scope nv r128 a16 tfe lwe d16`. `dmask` is omitted when 0
//! (`printDMask`).
use super::range;
use crate::decode::Instruction;
use crate::Family;
use std::fmt::Write as _;

/// `SQ_RSRC_IMG_*` names of the `dim` field (LLVM `MIMGDimInfo` AsmSuffix).
const DIMS: [&str; 8] = [
    "1D",
    "2D",
    "3D",
    "CUBE",
    "1D_ARRAY",
    "2D_ARRAY",
    "2D_MSAA",
    "2D_MSAA_ARRAY",
];

impl Instruction {
    /// Full text of an image instruction; `None` for other formats and BVH instructions
    /// (their fixed-width template text is used).
    pub(super) fn image_text(&self) -> Option<String> {
        let sh = self.image_shape()?;
        let b = sh.bits;
        let fam = self.target.family();
        let mut out = String::with_capacity(96);
        out.push_str(self.mnemonic());
        // LLVM's gfx10/gfx11 NSA sampler asm strings carry an extra space.
        if sh.info.sampler && b.nsa && fam <= Family::Gfx11 {
            out.push(' ');
        }
        let file = if b.acc { "a" } else { "v" };
        let _ = write!(
            out,
            " {}, ",
            range(file, u32::from(sh.vdata.0), u32::from(sh.vdata.1))
        );
        let addrs: Vec<String> = sh.addrs[..sh.n_addrs]
            .iter()
            .map(|&(r, w)| range("v", u32::from(r), u32::from(w)))
            .collect();
        if sh.bracket {
            let _ = write!(out, "[{}]", addrs.join(", "));
        } else {
            out.push_str(&addrs.join(", "));
        }
        let _ = write!(out, ", {}", self.scalar_text(sh.srsrc, 8));
        if let Some(s) = sh.ssamp {
            let _ = write!(out, ", {}", self.scalar_text(s, 4));
        }
        if b.dmask != 0 {
            let _ = write!(out, " dmask:{:#x}", b.dmask);
        }
        if let Some(d) = b.dim {
            let _ = write!(out, " dim:SQ_RSRC_IMG_{}", DIMS[d as usize & 7]);
        }
        if b.unorm {
            out.push_str(" unorm");
        }
        if fam >= Family::Gfx12 {
            out.push_str(&self.th_scope_text(b.th, b.scope));
            if b.nv {
                out.push_str(" nv");
            }
        } else {
            for (on, t) in [(b.glc, " glc"), (b.slc, " slc"), (b.dlc, " dlc")] {
                if on {
                    out.push_str(t);
                }
            }
        }
        let r128 = if fam == Family::Gfx9 { " a16" } else { " r128" };
        for (on, t) in [
            (b.r128, r128),
            (b.a16, " a16"),
            (b.tfe, " tfe"),
            (b.lwe, " lwe"),
            (b.da, " da"),
            (b.d16, " d16"),
        ] {
            if on {
                out.push_str(t);
            }
        }
        Some(out)
    }
}
