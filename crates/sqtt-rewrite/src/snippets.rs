//! Instruction snippets for per-lane address tracing, HW_ID scope checks and gfx12 shader-clock
//! packing (the SQTT Instrument Pass specification, `docs/markers/SPEC.md` of rocprof-trace-decoder, sections "Address Tracing",
//! "Scope filtering (bitmasks)", "GFX12 Shader Clock Packing", "Instruction Overhead").
//!
//! Every snippet is a [`Snippet`]: straight-line code (plus loops and skips whose branches stay
//! inside it) that is inserted in front of an original instruction and runs before it. A snippet
//! never touches memory, VGPRs, AGPRs, EXEC or VCC; it writes only M0, SCC and the SGPRs the
//! caller passes in (proven free by the caller). [`Snippet::new`] re-checks these rules on the
//! decoded instructions, so the reported clobbers are derived from the code, not hand-kept.
//! The one exception is [`spill_wrap`], which saves live SGPRs around a finished snippet in lanes
//! of a VGPR the original program never uses (issue 12 item 3).
//!
//! # Hazards (software wait states), per generation
//! The waits were taken from what `llc-22` inserts for the equivalent LLVM IR
//! (`llvm.amdgcn.readlane` loops feeding `llvm.amdgcn.s.ttracedata`, `llvm.amdgcn.s.getreg`,
//! `llvm.readcyclecounter`) for gfx900, gfx942, gfx1010, gfx1030, gfx1100, gfx1200 and gfx1250,
//! and from LLVM 22 `AMDGPUWaitSGPRHazards.cpp` / `GCNHazardRecognizer.cpp`:
//! - all targets: a SALU write of M0 followed by `s_ttracedata` needs one wait state; the spec
//!   emits `s_mov_b32 m0, x` + `s_nop 0` + `s_ttracedata` everywhere and so do we
//!   (`llc-22` puts `s_nop 0` or an independent SALU in between on gfx9).
//! - gfx9 (gfx900..gfx950), gfx10.3, gfx11, gfx1250: `llc-22` inserts no other wait for a SALU
//!   write of the lane-select SGPR followed by `v_readlane_b32`, nor for a `v_readlane_b32` SGPR
//!   result read by SALU (gfx11/gfx1250 `s_delay_alu` is a scheduling hint only and is omitted).
//! - gfx1200/gfx1201 (`AMDGPUWaitSGPRHazards`): an SGPR written by SALU and then read by SALU or
//!   VALU needs `s_wait_alu depctr_sa_sdst(0)` in between (when the SGPR pair was ever read by a
//!   VALU; callers' register history is unknown, so we assume it was); an SGPR written by VALU and
//!   read by VALU needs `s_wait_alu depctr_va_sdst(0)`. A VALU-written SGPR read by SALU needs no
//!   wait there (`llc-22 -mcpu=gfx1200` emits `v_readlane_b32 s1, ...` then `s_mov_b32 m0, s1`
//!   with nothing between). M0 and EXEC are not tracked by that model. The snippets place the
//!   waits automatically (see `Emitter`): one before the loop, one per loop iteration.
//! - gfx1010..gfx1013 (`GCNHazardRecognizer`, LdsBranchVmemWAR): an LDS access, a branch and a
//!   VMEM access in either order need `s_waitcnt_vscnt null, 0` between them, so every snippet
//!   that contains a branch ends with it on those processors.
//! - Address-trace snippets start with at least nine SALU instructions before their first VALU
//!   (`v_readlane_b32`), i.e. at least nine wait states after the preceding original VALU; this
//!   covers the 1..5-wait-state VALU-forwarding hazards of gfx9/gfx90a/gfx940 but not MFMA
//!   results (up to 19) nor gfx11+ transcendental-result hazards (counted in VALUs): those, from
//!   the original code before the site, get their waits in front of the finished block
//!   ([`entry_waits`]).
//!
//!
//! The hazard facts themselves live in `amdgpu_isa::hazard` (one table shared with the verifier,
//! which checks every output against it); the processor sets and wait encodings used here come
//! from there.
//!
//! Callers must insert a snippet immediately before the traced instruction, after the
//! `s_waitcnt`/`s_wait_*` that guard its operands (the snippet reads the same VGPRs).

mod addr;
mod clock;
mod entry;
mod scope;
mod spill;

pub use addr::{
    address_trace, payload_count, scratch_count, scratch_wanted, trace_name, AddrSource, ScalarSrc,
    TraceKind, VCC_LO,
};
pub use clock::clock_marker;
pub use entry::{entry_waits, needs_entry_check, Decoded};
pub use scope::{scope_guard, scope_init, ScopeMasks};
pub use spill::{spill_wrap, MAX_SAVED};

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::hazard;
use amdgpu_isa::{EncodeError, Family, Flow, InstClass, Instruction, Target};

/// Why a snippet cannot be built. No variant carries a file offset: snippets are built from
/// caller-chosen registers; the caller adds the site's offset to its own error.
#[derive(Debug, thiserror::Error)]
pub enum SnippetError {
    #[error("{target}: cannot encode {what}: {source}")]
    Encode {
        what: &'static str,
        target: &'static str,
        source: EncodeError,
    },
    #[error("wave size {wave_size} is not valid on {target} (32 or 64; gfx9 is wave64 only)")]
    WaveSize {
        wave_size: u32,
        target: &'static str,
    },
    #[error("v{vgpr} cannot be read by v_readlane_b32 (VGPR source 0..=255)")]
    VgprRange { vgpr: u32 },
    #[error("scratch SGPR s{sgpr} overlaps {what}")]
    RegisterOverlap { sgpr: u8, what: &'static str },
    #[error("{what} needs an even SGPR (64-bit pair), got s{sgpr}")]
    UnalignedPair { sgpr: u8, what: &'static str },
    #[error("{target}: shader-clock packing exists only on gfx1200, gfx1201 and gfx1250")]
    ClockTarget { target: &'static str },
    #[error(
        "shader clock bits {bits} / shift {shift} invalid (need 1 <= bits <= 29, bits + shift <= 32)"
    )]
    ClockBits { bits: u32, shift: u32 },
    #[error(
        "marker value {value:#x} does not fit the {avail} bits left below a {bits}-bit clock field"
    )]
    ValueTooWide { value: u32, bits: u32, avail: u32 },
    #[error("internal: snippet breaks its own rule: {0}")]
    Rule(String),
}

/// A finished snippet and what it clobbers (derived from the decoded instructions).
#[derive(Clone, Debug)]
pub struct Snippet {
    /// Instructions in execution order (branches are relative and stay inside the snippet).
    pub code: Vec<Instruction>,
    /// SCC is written (the caller must save it, or prove it dead, before the insertion point).
    pub clobbers_scc: bool,
    /// M0 is written.
    pub clobbers_m0: bool,
    /// SGPR numbers written, ascending (only the caller's scratch/flag registers).
    pub sgprs: Vec<u8>,
}

impl Snippet {
    /// Wraps `code` after checking the snippet rules: no memory access, no VGPR/AGPR/EXEC/VCC
    /// write, only fall-through instructions and PC-relative branches whose targets lie inside
    /// `[0, size]` bytes (a target equal to the size falls out of the end). Errors:
    /// [`SnippetError::Rule`] naming the offending instruction.
    pub fn new(code: Vec<Instruction>) -> Result<Snippet, SnippetError> {
        use amdgpu_isa::SpecialReg as S;
        let size: u64 = code.iter().map(|i| i.len() as u64).sum();
        let mut pc = 0u64;
        let mut sgpr_bits = 0u128;
        let (mut scc, mut m0) = (false, false);
        for i in &code {
            let m = i.mnemonic();
            let mem = matches!(
                i.class(),
                InstClass::Smem
                    | InstClass::Ds
                    | InstClass::Flat
                    | InstClass::Global
                    | InstClass::Scratch
                    | InstClass::Buffer
                    | InstClass::Image
                    | InstClass::Export
            );
            if mem || i.memory().is_some() {
                return Err(SnippetError::Rule(format!("{m} accesses memory")));
            }
            match i.flow() {
                Flow::Fallthrough => {}
                Flow::Branch { .. } => {
                    let t = i.branch_target(pc).unwrap_or(u64::MAX);
                    if t > size {
                        return Err(SnippetError::Rule(format!(
                            "{m} at {pc:#x} leaves the snippet (target {t:#x}, size {size:#x})"
                        )));
                    }
                }
                f => return Err(SnippetError::Rule(format!("{m} has control flow {f:?}"))),
            }
            let w = i.writes();
            if w.max_vgpr().is_some() || w.max_agpr().is_some() {
                return Err(SnippetError::Rule(format!("{m} writes a vector register")));
            }
            if [S::ExecLo, S::ExecHi, S::VccLo, S::VccHi]
                .iter()
                .any(|r| w.contains(*r))
            {
                return Err(SnippetError::Rule(format!("{m} writes EXEC or VCC")));
            }
            scc |= w.contains(S::Scc);
            m0 |= w.contains(S::M0);
            sgpr_bits |= w.sgpr_bits();
            pc += i.len() as u64;
        }
        // Ascending SGPR numbers (s0..s105: `RegSet::sgpr_bits`).
        let sgprs: Vec<u8> = (0..128u8).filter(|&s| sgpr_bits >> s & 1 != 0).collect();
        Ok(Snippet {
            code,
            clobbers_scc: scc,
            clobbers_m0: m0,
            sgprs,
        })
    }

    /// The encoded bytes, in order.
    pub fn bytes(&self) -> Vec<u8> {
        self.code.iter().flat_map(|i| i.bytes().to_vec()).collect()
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.code.iter().map(|i| i.len()).sum()
    }
}

/// `s_wait_alu depctr_sa_sdst(0)` as `llvm-mc-22` encodes it (0xfffe):
/// [`hazard::DepField::SaSdst`] at 0, the wait of rule [`hazard::SALU_SGPR_READ`].
const WAIT_SA_SDST: u16 = 0xfffe;
/// `s_wait_alu depctr_va_sdst(0)` as `llvm-mc-22` encodes it (0xf19f; bits 6:5 belong to no
/// field): [`hazard::DepField::VaSdst`] at 0, the wait of rule [`hazard::VALU_SGPR_READ`].
const WAIT_VA_SDST: u16 = 0xf19f;

/// The dependency-counter immediate that waits for `field` (LLVM's encodings for the two the
/// snippets need, every other field at its maximum otherwise).
fn depctr_wait(field: hazard::DepField) -> u16 {
    match field {
        hazard::DepField::SaSdst => WAIT_SA_SDST,
        hazard::DepField::VaSdst => WAIT_VA_SDST,
        f => f.wait_imm(),
    }
}

/// Appends instructions and places the waits their hazards need, from the shared rule table:
/// every instruction is checked with [`hazard::Scanner`] (the verifier's scanner) against the
/// snippet's own instructions before it, and each violated rule's fix is inserted first (gfx12
/// `s_wait_alu` for the SGPR hazards of `AMDGPUWaitSGPRHazards`, `s_nop` for wait-state rules,
/// `s_waitcnt_vscnt null, 0` for gfx10.1 LDS/branch/VMEM). Rules fixed by VALU counts cannot be
/// placed by a snippet (it has no VALU to spare) and are an error. With `caller_unknown`, every
/// SGPR is assumed to carry an uncommitted SALU write from the code before the snippet (gfx12).
/// Hazards from the original code before the finished block are resolved by [`entry_waits`].
pub(crate) struct Emitter {
    pub t: Target,
    pub code: Vec<Instruction>,
    sc: hazard::Scanner,
}

impl Emitter {
    /// `caller_unknown`: the original code may have SALU- or VALU-written any SGPR right before
    /// the snippet (scratch SGPRs come from liveness, so a dead carry-out a VALU just wrote may
    /// be one): the first read of an SGPR waits for both.
    pub fn new(t: Target, caller_unknown: bool) -> Emitter {
        let mut sc = hazard::Scanner::new(t);
        if caller_unknown {
            sc.assume_unknown_sgpr_writes();
        }
        Emitter {
            t,
            code: Vec::new(),
            sc,
        }
    }

    fn encoded(
        &self,
        what: &'static str,
        r: Result<Instruction, EncodeError>,
    ) -> Result<Instruction, SnippetError> {
        r.map_err(|source| SnippetError::Encode {
            what,
            target: self.t.name(),
            source,
        })
    }

    /// Appends `i` without a hazard check (a wait itself).
    fn raw(&mut self, i: Instruction) {
        self.sc.push(&i);
        self.code.push(i);
    }

    /// The instruction that resolves `fix`.
    fn wait_for(&self, fix: hazard::Fix, rule: &str) -> Result<Instruction, SnippetError> {
        let t = self.t;
        match fix {
            hazard::Fix::DepCtr(f) if matches!(t.family(), Family::Gfx12 | Family::Gfx1250) => {
                self.encoded("s_wait_alu", build::s_wait_alu(t, depctr_wait(f)))
            }
            hazard::Fix::DepCtr(f) => self.encoded(
                "s_waitcnt_depctr",
                build::s_waitcnt_depctr(t, depctr_wait(f)),
            ),
            hazard::Fix::WaitStates(n) => {
                self.encoded("s_nop", build::s_nop(t, u16::from(n.saturating_sub(1))))
            }
            hazard::Fix::VsCntZero => self.encoded("s_waitcnt_vscnt", build::s_waitcnt_vscnt(t, 0)),
            hazard::Fix::Valus(_) => Err(SnippetError::Rule(format!(
                "hazard {rule} needs VALU instructions in between"
            ))),
        }
    }

    /// Appends one instruction, after the waits its hazards need.
    pub fn push(
        &mut self,
        what: &'static str,
        r: Result<Instruction, EncodeError>,
    ) -> Result<(), SnippetError> {
        let i = self.encoded(what, r)?;
        // Each wait resolves at least its rule; a few rounds cover every rule at once.
        for _ in 0..hazard::RULES.len() {
            let Some(need) = self.sc.push_if_clear(&i).first().copied() else {
                self.code.push(i);
                return Ok(());
            };
            let w = self.wait_for(need.rule.fix, need.rule.id)?;
            self.raw(w);
        }
        Err(SnippetError::Rule(format!(
            "{what}: hazard waits do not converge"
        )))
    }

    /// Commits every pending SALU/VALU SGPR write (gfx1200/gfx1201 only; no-op elsewhere).
    pub fn flush(&mut self) -> Result<(), SnippetError> {
        for f in self.sc.uncommitted() {
            let w = self.wait_for(hazard::Fix::DepCtr(f), "flush")?;
            self.raw(w);
        }
        Ok(())
    }

    /// Whether SGPR writes are still uncommitted (gfx1200/gfx1201).
    pub fn pending(&self) -> bool {
        self.sc.pending_sgpr_writes()
    }

    /// `s_nop 0` + `s_ttracedata` (M0 was just written: one wait state).
    pub fn trace_m0(&mut self) -> Result<(), SnippetError> {
        self.push("s_nop", build::s_nop(self.t, 0))?;
        self.push("s_ttracedata", build::s_ttracedata(self.t))
    }

    /// `s_mov_b32 m0, src` + `s_nop 0` + `s_ttracedata`: one shaderdata word.
    pub fn word(&mut self, src: Operand) -> Result<(), SnippetError> {
        self.push("s_mov_b32 m0", build::s_mov_b32(self.t, Operand::M0, src))?;
        self.trace_m0()
    }

    /// Byte size of `code[from..]`.
    pub fn bytes_since(&self, from: usize) -> usize {
        self.code
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(|i| i.len())
            .sum()
    }

    /// Appends `s_waitcnt_vscnt null, 0` on gfx1010..gfx1013 (snippets with branches): the
    /// fix of [`hazard::LDS_BRANCH_VMEM`] for original LDS/VMEM accesses on both sides.
    pub fn branch_tail(&mut self) -> Result<(), SnippetError> {
        if hazard::LDS_BRANCH_VMEM.scope.contains(self.t) {
            let w = self.wait_for(hazard::LDS_BRANCH_VMEM.fix, hazard::LDS_BRANCH_VMEM.id)?;
            self.raw(w);
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Snippet, SnippetError> {
        Snippet::new(self.code)
    }
}

/// Branch displacement (dwords, `simm16`) from the end of a branch to `target_bytes` before it
/// (negative) or after it (positive).
fn simm16(delta_bytes: i64) -> Result<i16, SnippetError> {
    let d = delta_bytes / 4;
    i16::try_from(d).map_err(|_| SnippetError::Rule(format!("branch of {d} dwords")))
}

/// Checks a wave size for `t` (gfx9: 64; gfx10+: 32 or 64).
fn check_wave(t: Target, wave_size: u32) -> Result<(), SnippetError> {
    let ok = match t.family() {
        Family::Gfx9 => wave_size == 64,
        _ => wave_size == 32 || wave_size == 64,
    };
    if ok {
        Ok(())
    } else {
        Err(SnippetError::WaveSize {
            wave_size,
            target: t.name(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::hazard::DepField;

    /// The snippet wait encodings wait for exactly the fields the shared hazard rules name.
    #[test]
    fn wait_encodings_match_the_hazard_rules() {
        assert_eq!(
            hazard::SALU_SGPR_READ.fix,
            hazard::Fix::DepCtr(DepField::SaSdst)
        );
        assert_eq!(
            hazard::VALU_SGPR_READ.fix,
            hazard::Fix::DepCtr(DepField::VaSdst)
        );
        assert!(DepField::SaSdst.is_zero_in(u32::from(WAIT_SA_SDST)));
        assert!(!DepField::VaSdst.is_zero_in(u32::from(WAIT_SA_SDST)));
        assert!(DepField::VaSdst.is_zero_in(u32::from(WAIT_VA_SDST)));
        assert!(!DepField::SaSdst.is_zero_in(u32::from(WAIT_VA_SDST)));
    }
}
