//! Software-managed data hazards: which producer → consumer pairs need how many wait states or
//! which dependency-counter wait, per processor. One table for the rewriter (which places the
//! waits its snippets need) and the verifier (which checks every output against it).
//!
//! # Sources of the facts
//! LLVM 22 `GCNHazardRecognizer.cpp` (the post-RA hazard recognizer, `-run-pass=post-RA-hazard-rec`)
//! and `AMDGPUWaitSGPRHazards.cpp` (`-run-pass=amdgpu-wait-sgpr-hazards`, gfx12), read to learn
//! and then probed with `llc-22 -run-pass=...` on two- and three-instruction MIR functions for
//! gfx900, gfx90a, gfx942, gfx950, gfx1010, gfx1030, gfx1100, gfx1200 and gfx1250 (the probe
//! results are in `docs/hazards.md`). Only hazards that code around an inserted snippet can take
//! part in are modelled; see [`RULES`] for the list and `docs/hazards.md` for what is left out.
//!
//! # Counting
//! A *wait state* is one issue cycle of the wave: `s_nop n` provides `n + 1`, every other
//! instruction one (LLVM `SIInstrInfo::getNumWaitStates`). Rules that are not counted in wait
//! states are resolved by a dependency-counter wait (`s_waitcnt_depctr` on gfx10/gfx11,
//! `s_wait_alu` on gfx12, the same SOPP encoding) with a field at 0, by a number of VALU
//! instructions, or by an event that drains the counter (see [`Fix`]).
//!
//! # Use
//! [`Scanner`] walks straight-line code in issue order. Before each instruction,
//! [`Scanner::check`] lists the rules it would violate if issued now ([`Need`], with the producer's
//! position); [`Scanner::push`] then records it. A branch target has more predecessors than the
//! previous instruction: callers that walk code linearly approximate control flow by fall-through.

mod scanner;
#[cfg(test)]
mod tests;

pub use scanner::{ws, Scanner, SgprUse};

use crate::{Family, Target};

/// How a hazard is resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fix {
    /// At least this many wait states between producer and consumer (`s_nop n-1` in between).
    WaitStates(u8),
    /// A dependency-counter wait (`s_waitcnt_depctr` / `s_wait_alu`) whose field is 0.
    DepCtr(DepField),
    /// gfx11/gfx1250 transcendental forwarding: this many VALU instructions in between, or a
    /// `DepCtr(VaVdst)` wait.
    Valus(u8),
    /// gfx10.1 `s_waitcnt_vscnt null, 0` between the two memory accesses.
    VsCntZero,
}

/// A field of the dependency-counter immediate (`simm16` of `s_waitcnt_depctr` / `s_wait_alu`;
/// bit positions: LLVM 22 `AMDGPUBaseInfo.cpp` `DepCtr` encoders, checked with `llvm-mc-22`:
/// `depctr_sa_sdst(0)` = 0xfffe, `depctr_va_sdst(0)` = 0xf19f, `depctr_va_vdst(0)` = 0x0fff,
/// `depctr_vm_vsrc(0)` = 0xffe3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepField {
    /// SALU writes of SGPRs (bit 0).
    SaSdst,
    /// VALU writes of VCC (bit 1).
    VaVcc,
    /// VMEM reads of VGPR/SGPR sources (bits 4:2).
    VmVsrc,
    /// VALU writes of SGPRs (bits 11:9).
    VaSdst,
    /// VALU writes of VGPRs (bits 15:12).
    VaVdst,
}

impl DepField {
    /// Whether the depctr immediate `imm` waits for this field to reach 0.
    pub fn is_zero_in(self, imm: u32) -> bool {
        let (shift, width) = self.bits();
        (imm >> shift) & ((1 << width) - 1) == 0
    }

    /// The immediate that waits for this field only (every other field at its maximum).
    pub fn wait_imm(self) -> u16 {
        let (shift, width) = self.bits();
        !(((1u16 << width) - 1) << shift)
    }

    fn bits(self) -> (u32, u32) {
        match self {
            DepField::SaSdst => (0, 1),
            DepField::VaVcc => (1, 1),
            DepField::VmVsrc => (2, 3),
            DepField::VaSdst => (9, 3),
            DepField::VaVdst => (12, 4),
        }
    }
}

/// Which processors a rule applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Family gfx9 (gfx900 .. gfx950).
    Gfx9,
    /// gfx908, gfx90a and the gfx940 line (the processors with MFMA).
    Mfma,
    /// gfx940, gfx941, gfx942, gfx950, gfx9-4-generic.
    Gfx940,
    /// gfx1010 .. gfx1013 and gfx10-1-generic (LLVM: GFX10 but not gfx10.3).
    Gfx101,
    /// Family gfx11.
    Gfx11,
    /// gfx1200, gfx1201, gfx12-generic (LLVM `hasVALUReadSGPRHazard`).
    Gfx12,
    /// Family gfx1250.
    Gfx1250,
}

impl Scope {
    /// Every scope, for [`Scanner::scopes`].
    const ALL: [Scope; 7] = [
        Scope::Gfx9,
        Scope::Mfma,
        Scope::Gfx940,
        Scope::Gfx101,
        Scope::Gfx11,
        Scope::Gfx12,
        Scope::Gfx1250,
    ];

    /// This scope's bit in [`Scanner::scopes`].
    fn bit(self) -> u8 {
        1 << self as u8
    }

    /// Whether `t` is in this scope.
    pub fn contains(self, t: Target) -> bool {
        let n = t.name();
        match self {
            Scope::Gfx9 => t.family() == Family::Gfx9,
            Scope::Mfma => matches!(n, "gfx908" | "gfx90a") || Scope::Gfx940.contains(t),
            Scope::Gfx940 => matches!(
                n,
                "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic"
            ),
            Scope::Gfx101 => matches!(
                n,
                "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
            ),
            Scope::Gfx11 => t.family() == Family::Gfx11,
            Scope::Gfx12 => t.family() == Family::Gfx12,
            Scope::Gfx1250 => t.family() == Family::Gfx1250,
        }
    }
}

/// One hazard rule: a producer, a consumer reading (or writing) what the producer touched, and
/// what must lie between them.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    /// Short stable name (findings and tests use it).
    pub id: &'static str,
    pub scope: Scope,
    /// Producer → consumer, in words.
    pub what: &'static str,
    pub fix: Fix,
    /// Where the fact comes from (LLVM 22 function / subtarget feature).
    pub source: &'static str,
}

macro_rules! rule {
    ($name:ident, $id:literal, $scope:ident, $fix:expr, $what:literal, $src:literal) => {
        #[doc = $what]
        pub const $name: Rule = Rule {
            id: $id,
            scope: Scope::$scope,
            what: $what,
            fix: $fix,
            source: $src,
        };
    };
}

rule!(
    M0_MSG,
    "m0-msg",
    Gfx9,
    Fix::WaitStates(1),
    "SALU write of M0 → s_ttracedata, s_sendmsg, s_sendmsghalt or a GDS access",
    "GCNHazardRecognizer::checkReadM0Hazards, hasReadM0SendMsgHazard (VI..GFX9)"
);
rule!(
    M0_MOVREL,
    "m0-movrel",
    Gfx9,
    Fix::WaitStates(1),
    "SALU write of M0 → s_movrel*, v_interp_*, ds_read/write_addtid_b32, or an LDS-DMA VMEM access",
    "GCNHazardRecognizer::checkReadM0Hazards, hasReadM0MovRelInterpHazard / hasReadM0LdsDmaHazard (GFX9)"
);
rule!(
    VALU_SGPR_LANESEL,
    "valu-sgpr-lanesel",
    Gfx9,
    Fix::WaitStates(4),
    "VALU write of an SGPR → v_readlane/v_writelane using it as lane select",
    "GCNHazardRecognizer::checkRWLaneHazards (RWLaneWaitStates = 4)"
);
rule!(
    VALU_SGPR_VMEM,
    "valu-sgpr-vmem",
    Gfx9,
    Fix::WaitStates(5),
    "VALU write of an SGPR → VMEM/FLAT instruction reading it",
    "GCNHazardRecognizer::checkVMEMHazards, hasVMEMReadSGPRVALUDefHazard (VmemSgprWaitStates = 5)"
);
rule!(
    SETREG,
    "setreg",
    Gfx9,
    Fix::WaitStates(2),
    "s_setreg of a hardware register → s_getreg or s_setreg of the same register",
    "GCNHazardRecognizer::checkGetRegHazards / checkSetRegHazards (2 wait states on GFX9)"
);
rule!(
    MFMA_RESULT,
    "mfma-result",
    Mfma,
    Fix::WaitStates(19),
    "MFMA/SMFMAC write of a VGPR/AGPR → VALU, VMEM, DS or export reading or writing it (19 wait states is LLVM's largest; shorter MFMAs need fewer)",
    "GCNHazardRecognizer::checkMAIVALUHazards (MaxLookAhead 19)"
);
rule!(
    VALU_VGPR_RWLANE,
    "valu-vgpr-rwlane",
    Gfx940,
    Fix::WaitStates(1),
    "VALU write of a VGPR → v_readlane/v_readfirstlane/v_writelane reading it",
    "GCNHazardRecognizer::checkMAIVALUHazards, GFX940 VALU-write-VGPR / readlane (probed: s_nop 0)"
);
rule!(
    TRANS_USE_940,
    "trans-use",
    Gfx940,
    Fix::WaitStates(1),
    "transcendental VALU write of a VGPR → non-transcendental VALU reading it",
    "GCNHazardRecognizer::checkMAIVALUHazards, GFX940 TransDefWaitstates = 1"
);
rule!(
    TRANS_USE_11,
    "trans-use",
    Gfx11,
    Fix::Valus(6),
    "transcendental VALU write of a VGPR → VALU reading it with fewer than 6 VALUs between, unless s_waitcnt_depctr va_vdst(0)",
    "GCNHazardRecognizer::fixVALUTransUseHazard (probed: 5 VALUs between still need the wait)"
);
rule!(
    TRANS_USE_1250,
    "trans-use",
    Gfx1250,
    Fix::Valus(1),
    "transcendental VALU write of a VGPR → the next VALU reading it (one VALU between, e.g. v_nop, resolves it)",
    "GCNHazardRecognizer::fixVALUTransUseHazard, GFX1250 (probed: llc-22 inserts v_nop)"
);
rule!(
    VMEM_SGPR_SALU_WRITE,
    "vmem-sgpr-salu-write",
    Gfx101,
    Fix::DepCtr(DepField::VmVsrc),
    "VMEM/DS/FLAT read of an SGPR or M0 → SALU/SMEM write of it, unless a VALU or s_waitcnt 0 lies between",
    "GCNHazardRecognizer::fixVMEMtoScalarWriteHazards, hasVMEMtoScalarWriteHazard"
);
rule!(
    LDS_BRANCH_VMEM,
    "lds-branch-vmem",
    Gfx101,
    Fix::VsCntZero,
    "LDS access → branch → VMEM access (or VMEM → branch → LDS)",
    "GCNHazardRecognizer::fixLdsBranchVmemWARHazard, hasLdsBranchVmemWARHazard"
);
rule!(
    SALU_SGPR_READ,
    "salu-sgpr-read",
    Gfx12,
    Fix::DepCtr(DepField::SaSdst),
    "SALU write of an SGPR → SALU or VALU reading it, unless SMEM, a buffer/image access or a wait lies between",
    "AMDGPUWaitSGPRHazards (SALUHazards; every SGPR pair assumed tracked)"
);
rule!(
    VALU_SGPR_READ,
    "valu-sgpr-read",
    Gfx12,
    Fix::DepCtr(DepField::VaSdst),
    "VALU write of an SGPR → VALU reading it, unless a SALU read of any SGPR, SMEM, a buffer/image access or a wait lies between",
    "AMDGPUWaitSGPRHazards (VALUHazards)"
);
rule!(
    VALU_VCC_READ,
    "valu-vcc-read",
    Gfx12,
    Fix::DepCtr(DepField::VaVcc),
    "VALU write of VCC → VALU reading VCC, unless a SALU read of VCC, SMEM, a buffer/image access or a wait lies between",
    "AMDGPUWaitSGPRHazards (VCCHazard)"
);
rule!(
    SETPC_PENDING,
    "setpc-pending",
    Gfx12,
    Fix::DepCtr(DepField::SaSdst),
    "uncommitted SALU/VALU SGPR write → call, return or indirect jump (s_setpc/s_swappc/s_call)",
    "AMDGPUWaitSGPRHazards (IsSetPC flushes every hazard)"
);

/// Every rule, for documentation and tests.
pub const RULES: [&Rule; 16] = [
    &M0_MSG,
    &M0_MOVREL,
    &VALU_SGPR_LANESEL,
    &VALU_SGPR_VMEM,
    &SETREG,
    &MFMA_RESULT,
    &VALU_VGPR_RWLANE,
    &TRANS_USE_940,
    &TRANS_USE_11,
    &TRANS_USE_1250,
    &VMEM_SGPR_SALU_WRITE,
    &LDS_BRANCH_VMEM,
    &SALU_SGPR_READ,
    &VALU_SGPR_READ,
    &VALU_VCC_READ,
    &SETPC_PENDING,
];

/// A violated rule: the consumer (the instruction being checked) needs `rule.fix` after the
/// producer at position `producer` (the [`Scanner`] position, counted from 0 over pushed
/// instructions; `None` when the producer is the assumed unknown state before the first one).
/// For [`LDS_BRANCH_VMEM`] the producer is the branch between the two accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub rule: &'static Rule,
    pub producer: Option<usize>,
}

/// Instructions kept for wait-state and VALU-count rules (at least the largest window, 19
/// wait states, and enough SALU instructions around the 6 VALUs of the gfx11 rule).
const HISTORY: usize = 64;

/// How far back (pushed instructions) a producer of a wait-state or VALU-count rule
/// ([`Fix::WaitStates`], [`Fix::Valus`]) can be from its consumer: [`Scanner::check`] looks at
/// the last `LOOKBACK` pushed instructions only (its history), which covers the widest of those
/// rules, [`MFMA_RESULT`]'s 19 wait states (LLVM 22 `GCNHazardRecognizer::checkMAIVALUHazards`,
/// `MaxLookAhead` 19; every other instruction provides at least one wait state), and the 6 VALUs
/// of [`TRANS_USE_11`] with SALUs between. The other rules ([`Fix::DepCtr`],
/// [`Fix::VsCntZero`]) follow state with no such bound ([`SgprUse`],
/// [`Scanner::check_push_state`]).
pub const LOOKBACK: usize = HISTORY;
