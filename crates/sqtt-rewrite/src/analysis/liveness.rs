//! M0 and SCC facts of one analysed function (part of [`crate::analysis`]): which implicit M0
//! uses are real reads, M0 liveness and known constants, SCC liveness.

use super::builders::scalar_const;
use super::Func;
use crate::reguse::RegUse;
use amdgpu_isa::{Flow, Instruction};

/// For an instruction whose decoded reads include M0: whether that implicit use is a real read
/// on the target (the M0 read of [`crate::reguse::RegUse::reads_m0`]).
///
/// LLVM 22's disassembler decodes gfx9 DS instructions to the `*_vi` MC opcodes it shares with
/// gfx8, whose descriptors list an implicit M0 use (gfx8 clamps LDS addresses with M0). From gfx9
/// on, plain LDS instructions do not use M0 (LLVM `GCNSubtarget::ldsRequiresM0Init`: gfx8 and
/// older only). DS instructions that still use M0 on every generation are kept: GDS (the `gds`
/// bit: dword 0 bit 16 on gfx9, bit 17 on gfx10/gfx11), GWS, `ds_ordered_count`,
/// `ds_append`/`ds_consume` and the `addtid` forms (ISA manuals, "DS" chapter: M0 supplies the
/// base address or counter there).
///
/// `s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)` (gfx11 and gfx12, message id 3 in SIMM16[7:0]) does
/// not read M0 either: LLVM emits it right before `s_endpgm` after register allocation without
/// setting M0 (`SIInsertWaitcnts`, "release VGPRs"; `SendMsg::ID_DEALLOC_VGPRS_GFX11Plus`), and
/// the ISA manuals name no M0 payload for it. Other messages keep the decoder's M0 use.
pub(crate) fn m0_use_is_read(inst: &Instruction) -> bool {
    let m = inst.mnemonic();
    if m == "s_sendmsg" {
        return !releases_vgprs(inst);
    }
    // The MC descriptors also list M0 for FLAT/GLOBAL/SCRATCH loads and stores; only the LDS-DMA
    // forms (`*_lds_*`: M0 holds the LDS address) read it.
    if matches!(
        inst.format(),
        amdgpu_isa::Format::Flat | amdgpu_isa::Format::Global | amdgpu_isa::Format::Scratch
    ) {
        return m.contains("lds");
    }
    if !m.starts_with("ds_") {
        return true;
    }
    let special_ds = ["gws", "ordered_count", "append", "consume", "addtid"]
        .iter()
        .any(|k| m.contains(k));
    let gds_bit = match inst.target().family() {
        amdgpu_isa::Family::Gfx9 => Some(16),
        amdgpu_isa::Family::Gfx10 | amdgpu_isa::Family::Gfx11 => Some(17),
        _ => None,
    };
    let gds = gds_bit.is_some_and(|b| inst.word(0) >> b & 1 == 1);
    special_ds || gds
}

/// Whether `inst` (an `s_sendmsg`) sends MSG_DEALLOC_VGPRS: gfx11 and gfx12 only (on gfx9 and
/// gfx10 id 3 is MSG_GS_DONE, which reads M0), message id in SIMM16 bits 7:0 (LLVM
/// `SendMsg::ID_MASK_GFX11Plus_`).
fn releases_vgprs(inst: &Instruction) -> bool {
    matches!(
        inst.target().family(),
        amdgpu_isa::Family::Gfx11 | amdgpu_isa::Family::Gfx12
    ) && inst.word(0) & 0xff == 3
}

/// M0 facts at each instruction of a function: whether M0 is live before it, and the constant it
/// holds there if every path wrote the same `s_mov_b32 m0, K`.
#[derive(Debug, Clone)]
pub struct M0Facts {
    /// Live before instruction i.
    pub live: Vec<bool>,
    /// Known constant before instruction i.
    pub constant: Vec<Option<u32>>,
}

/// Computes [`M0Facts`]. Calls clobber M0 (it is not callee-saved in the AMDGPU calling
/// convention, LLVM `SIRegisterInfo` CSR lists); returns and `s_endpgm` leave it dead.
pub fn m0_facts(f: &Func) -> M0Facts {
    let n = f.insts.len();
    let reads: Vec<bool> = f.reg_use.iter().map(RegUse::reads_m0).collect();
    let writes: Vec<bool> = f
        .reg_use
        .iter()
        .enumerate()
        .map(|(i, u)| u.writes_m0() || f.insts.flow(i) == Flow::Call)
        .collect();
    let live = backward_live(f, &reads, &writes);
    let (pred_at, pred_list) = f.flat_predecessors();
    #[derive(Clone, Copy, PartialEq)]
    enum C {
        Unreached,
        Known(u32),
        Unknown,
    }
    // What each instruction leaves in M0, decided once: `None` when it does not write M0,
    // `Some(C::Known(k))` for `s_mov_b32 m0, K`, `Some(C::Unknown)` for any other write.
    let sets: Vec<Option<C>> = (0..n)
        .map(|i| {
            if !writes[i] {
                return None;
            }
            let inst = f.insts.get(i);
            let known = (inst.mnemonic() == "s_mov_b32" && f.reg_use[i].writes_m0())
                .then(|| scalar_const(&inst, "ssrc0"))
                .flatten();
            Some(known.map_or(C::Unknown, |v| C::Known(v as u32)))
        })
        .collect();
    let mut state_in = vec![C::Unreached; n];
    if n > 0 {
        state_in[0] = C::Unknown;
    }
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..n {
            let mut v = if i == 0 { C::Unknown } else { C::Unreached };
            for &p in &pred_list[pred_at[i]..pred_at[i + 1]] {
                let o = sets[p].unwrap_or(state_in[p]);
                v = match (v, o) {
                    (C::Unreached, x) | (x, C::Unreached) => x,
                    (C::Known(a), C::Known(b)) if a == b => C::Known(a),
                    _ => C::Unknown,
                };
            }
            if v != state_in[i] {
                state_in[i] = v;
                changed = true;
            }
        }
    }
    let constant = state_in
        .iter()
        .map(|c| match c {
            C::Known(k) => Some(*k),
            _ => None,
        })
        .collect();
    M0Facts { live, constant }
}

/// SCC live before each instruction of `f` (backward liveness from the ISA tables' explicit and
/// implicit SCC reads and writes; calls clobber SCC, returns and `s_endpgm` leave it dead).
pub fn scc_live(f: &Func) -> Vec<bool> {
    let reads: Vec<bool> = f.reg_use.iter().map(RegUse::reads_scc).collect();
    let writes: Vec<bool> = f
        .reg_use
        .iter()
        .enumerate()
        .map(|(i, u)| u.writes_scc() || f.insts.flow(i) == Flow::Call)
        .collect();
    backward_live(f, &reads, &writes)
}

/// Backward liveness of one register over the function's CFG: live before `i` when `i` reads
/// it, or when it is live after `i` and `i` does not write it (iterated to a fixed point).
fn backward_live(f: &Func, reads: &[bool], writes: &[bool]) -> Vec<bool> {
    let mut live = vec![false; f.insts.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..f.insts.len()).rev() {
            let out = f.successors(i).any(|s| live[s]);
            let v = reads[i] || (out && !writes[i]);
            if v != live[i] {
                live[i] = v;
                changed = true;
            }
        }
    }
    live
}
