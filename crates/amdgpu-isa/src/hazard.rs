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

use std::collections::VecDeque;

use crate::{Family, InstClass, Instruction, RegSet, Special, SpecialReg, Target};

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

/// The scalar registers of one instruction that the rules without a window
/// ([`VMEM_SGPR_SALU_WRITE`], [`LDS_BRANCH_VMEM`], the gfx12 rules) read: enough to follow their
/// state through code whose wait-state rules need no check ([`Scanner::check_push_state`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SgprUse {
    /// SGPRs read: bit `n` is `s<n>` (0..=105, `RegSet::sgpr_bits`).
    pub reads: u128,
    /// SGPRs written.
    pub writes: u128,
    pub m0_read: bool,
    pub m0_write: bool,
    /// VCC_LO or VCC_HI read.
    pub vcc_read: bool,
    /// VCC_LO or VCC_HI written.
    pub vcc_write: bool,
}

impl SgprUse {
    /// From the registers an instruction reads and writes (`Instruction::reads` / `writes`).
    pub fn of(reads: &RegSet, writes: &RegSet) -> SgprUse {
        let vcc = |s: &RegSet| s.contains(SpecialReg::VccLo) || s.contains(SpecialReg::VccHi);
        SgprUse {
            reads: reads.sgpr_bits(),
            writes: writes.sgpr_bits(),
            m0_read: reads.contains(SpecialReg::M0),
            m0_write: writes.contains(SpecialReg::M0),
            vcc_read: vcc(reads),
            vcc_write: vcc(writes),
        }
    }

    /// SGPRs read as a mask, with M0 as bit [`M0_NUM`] when `with_m0`.
    fn read_mask(&self, with_m0: bool) -> u128 {
        (self.reads & ((1u128 << 106) - 1)) | (u128::from(with_m0 && self.m0_read) << M0_NUM)
    }

    /// SGPRs written as a mask, with M0 as bit [`M0_NUM`] when `with_m0`.
    fn write_mask(&self, with_m0: bool) -> u128 {
        (self.writes & ((1u128 << 106) - 1)) | (u128::from(with_m0 && self.m0_write) << M0_NUM)
    }
}

/// LLVM `TSFlags` bit of transcendental VALU instructions (`SIInstrFlags::TRANS`, bit 16).
const TSFLAG_TRANS: u64 = 1 << 16;

/// Straight-line hazard state. See the module docs.
#[derive(Clone, Debug)]
pub struct Scanner {
    t: Target,
    /// The scopes `t` is in ([`Scope::bit`]), decided once (not a name comparison per check).
    scopes: u8,
    /// [`max_windows`] of those scopes: past them nothing older can be a producer.
    max_ws: u32,
    max_valus: u32,
    pushed: usize,
    /// Recent instructions, newest first: their position, the registers they write, their
    /// class and their producer facts (decoded once when pushed, not once per later instruction
    /// checked).
    hist: VecDeque<(usize, RegSet, InstClass, Producer)>,
    /// gfx12: SGPRs (0..=105) with an uncommitted SALU / VALU write, and the writer's position.
    sa: Vec<(u16, Option<usize>)>,
    va: Vec<(u16, Option<usize>)>,
    /// gfx12: uncommitted VALU write of VCC.
    va_vcc: Option<usize>,
    /// gfx10.1: SGPRs (and M0 as 124) read by a VMEM/DS access since the last resolving event.
    vmem_reads: Vec<(u16, usize)>,
    /// gfx10.1: the last LDS / VMEM access not yet followed by `s_waitcnt_vscnt null, 0`, and
    /// the position of the first branch after it.
    lds: Option<(usize, Option<usize>)>,
    vmem: Option<(usize, Option<usize>)>,
}

/// Facts about a pushed instruction that every later check asks of it as a producer (computed
/// once when pushed, not once per consumer inside the window).
#[derive(Clone, Copy, Debug)]
struct Producer {
    /// A transcendental VALU (LLVM `TSFLAGS` `IsTRANS`).
    trans: bool,
    /// `v_mfma*` / `v_smfmac*`.
    mfma: bool,
    /// `s_setreg*`, with its hardware register id.
    setreg: Option<Option<u32>>,
    /// Wait states it provides ([`ws`]).
    ws: u32,
    /// A dependency-counter wait with `va_vdst(0)`.
    va_vdst_wait: bool,
}

/// SGPR number used for M0 in register-number sets (its scalar operand encoding).
const M0_NUM: u16 = 124;

fn sgprs(mut bits: u128) -> Vec<u16> {
    // Ascending SGPR numbers 0..=105 (and M0 as 124 last), from the set bits (not a membership
    // test per number).
    let mut v = Vec::with_capacity(bits.count_ones() as usize);
    while bits != 0 {
        v.push(bits.trailing_zeros() as u16);
        bits &= bits - 1;
    }
    v
}

/// The SGPRs 0..=105 of `set` as a bit mask (bit `n`: `s<n>`), with M0 as bit [`M0_NUM`] when
/// `with_m0` (membership tests on the mask instead of a list per check).
fn sgpr_mask(set: &RegSet, with_m0: bool) -> u128 {
    let m0 = with_m0 && set.contains(SpecialReg::M0);
    (set.sgpr_bits() & ((1u128 << 106) - 1)) | (u128::from(m0) << M0_NUM)
}

/// Whether SGPR number `s` (0..=105, or [`M0_NUM`]) is in `mask`.
fn has(mask: u128, s: u16) -> bool {
    s < 128 && mask >> s & 1 == 1
}

/// Whether `a` and `b` share a VGPR or an AGPR (one bitset intersection, not a membership test
/// per register number).
fn overlap_v(a: &RegSet, b: &RegSet) -> bool {
    let both = a.intersection(b);
    both.max_vgpr().is_some() || both.max_agpr().is_some()
}

fn is_vmem(i: &Instruction) -> bool {
    matches!(
        i.class(),
        InstClass::Buffer
            | InstClass::Image
            | InstClass::Flat
            | InstClass::Global
            | InstClass::Scratch
    )
}

fn is_trans(i: &Instruction) -> bool {
    i.class() == InstClass::Valu && i.llvm_tsflags() & TSFLAG_TRANS != 0
}

fn is_mfma(i: &Instruction) -> bool {
    let m = i.mnemonic();
    m.starts_with("v_mfma") || m.starts_with("v_smfmac")
}

fn is_rwlane(i: &Instruction) -> bool {
    matches!(
        i.mnemonic(),
        "v_readlane_b32" | "v_writelane_b32" | "v_readfirstlane_b32"
    ) || i.mnemonic().starts_with("v_readlane_b32")
        || i.mnemonic().starts_with("v_writelane_b32")
        || i.mnemonic().starts_with("v_readfirstlane_b32")
}

/// Hardware register id of `s_setreg*` / `s_getreg*` (simm16 bits 5:0).
fn hwreg(i: &Instruction) -> Option<u32> {
    matches!(i.special(), Special::Setreg | Special::Getreg)
        .then(|| i.field("simm16").map(|v| v & 0x3f))
        .flatten()
}

/// gfx9 readers of M0 with the one-wait-state hazard after a SALU write of M0.
fn m0_msg_reader(i: &Instruction) -> bool {
    matches!(i.special(), Special::TtraceData | Special::Sendmsg) || i.ds_gds()
}

/// Readers of M0 for [`M0_MOVREL`] (`s_movrel*`, `v_interp*`, the LDS `addtid` forms, VMEM
/// reading M0); `reads`: the registers `i` reads.
fn m0_movrel_reader(i: &Instruction, reads: &RegSet) -> bool {
    let m = i.mnemonic();
    m.starts_with("s_movrel")
        || m.starts_with("v_interp")
        || m.starts_with("ds_read_addtid")
        || m.starts_with("ds_write_addtid")
        || (is_vmem(i) && reads.contains(SpecialReg::M0))
}

/// The widest window of the rules of `scopes` ([`Scanner::scopes`]): wait states of
/// [`Fix::WaitStates`] rules and VALUs of [`Fix::Valus`] rules.
fn max_windows(scopes: u8) -> (u32, u32) {
    RULES
        .iter()
        .filter(|r| scopes & r.scope.bit() != 0)
        .fold((0u32, 0u32), |(w, v), r| match r.fix {
            Fix::WaitStates(n) => (w.max(u32::from(n)), v),
            Fix::Valus(n) => (w, v.max(u32::from(n))),
            _ => (w, v),
        })
}

/// The SGPR a v_readlane/v_writelane uses as lane select (`src1`), when it is an SGPR.
fn lane_select(i: &Instruction) -> Option<u16> {
    let v = i.field("src1")?;
    (v < 106).then_some(v as u16)
}

fn depctr_imm(i: &Instruction) -> Option<u32> {
    (i.special() == Special::WaitAlu)
        .then(|| i.field("simm16"))
        .flatten()
}

impl Scanner {
    /// An empty history: nothing was issued before the first pushed instruction.
    pub fn new(t: Target) -> Scanner {
        let scopes = Scope::ALL
            .iter()
            .filter(|s| s.contains(t))
            .fold(0u8, |a, s| a | s.bit());
        let (max_ws, max_valus) = max_windows(scopes);
        Scanner {
            t,
            scopes,
            max_ws,
            max_valus,
            pushed: 0,
            hist: VecDeque::new(),
            sa: Vec::new(),
            va: Vec::new(),
            va_vcc: None,
            vmem_reads: Vec::new(),
            lds: None,
            vmem: None,
        }
    }

    /// gfx12: assume every SGPR may have an uncommitted SALU or VALU write from code before the
    /// first pushed instruction (a snippet entered after unknown original code, whose scratch
    /// SGPRs may be dead carry-outs a VALU just wrote). No-op elsewhere.
    pub fn assume_unknown_sgpr_writes(&mut self) {
        if self.has(Scope::Gfx12) {
            self.sa = (0..106).map(|s| (s, None)).collect();
            self.va = (0..106).map(|s| (s, None)).collect();
        }
    }

    /// Whether the target is in scope `s`.
    fn has(&self, s: Scope) -> bool {
        self.scopes & s.bit() != 0
    }

    /// Instructions pushed so far.
    pub fn position(&self) -> usize {
        self.pushed
    }

    /// gfx12: whether an SGPR write is still uncommitted.
    pub fn pending_sgpr_writes(&self) -> bool {
        !self.uncommitted().is_empty()
    }

    /// gfx12: the dependency-counter fields whose wait (field = 0) commits every uncommitted
    /// SGPR write, in the order SALU writes ([`DepField::SaSdst`]), VALU writes
    /// ([`DepField::VaSdst`]), VALU writes of VCC ([`DepField::VaVcc`]). Empty elsewhere.
    pub fn uncommitted(&self) -> Vec<DepField> {
        let mut v = Vec::new();
        if !self.sa.is_empty() {
            v.push(DepField::SaSdst);
        }
        if !self.va.is_empty() {
            v.push(DepField::VaSdst);
        }
        if self.va_vcc.is_some() {
            v.push(DepField::VaVcc);
        }
        v
    }

    /// The rules `i` would violate if it were issued next (each with its nearest producer).
    pub fn check(&self, i: &Instruction) -> Vec<Need> {
        let (reads, writes) = i.reads_writes();
        self.check_regs(i, &reads, &writes)
    }

    /// [`Scanner::check`], then [`Scanner::push`], with `i`'s registers decoded once.
    pub fn check_push(&mut self, i: &Instruction) -> Vec<Need> {
        let (reads, writes) = i.reads_writes();
        let needs = self.check_regs(i, &reads, &writes);
        self.push_regs(i, reads, writes, Some(&needs));
        needs
    }

    /// [`Scanner::check`], then [`Scanner::push`] only when nothing is violated, with `i`'s
    /// registers decoded once: returns the violated rules; `i` was pushed when that is empty.
    /// (A caller that inserts the fixes first and then asks again: the snippet emitter.)
    pub fn push_if_clear(&mut self, i: &Instruction) -> Vec<Need> {
        let (reads, writes) = i.reads_writes();
        let needs = self.check_regs(i, &reads, &writes);
        if needs.is_empty() {
            // Nothing violated: the stateful rules found nothing either, as `push` would
            // find again.
            self.push_regs(i, reads, writes, Some(&needs));
        }
        needs
    }

    /// [`Scanner::check_push`] without checking the wait-state and VALU-count rules: returns
    /// what the rules without a window find for `i`, and pushes `i` exactly as
    /// [`Scanner::check_push`] does (its history entry is kept, so later instructions are
    /// checked against it; those rules' needs never change the state). For a caller that knows
    /// no window rule finding at `i` matters to it.
    pub fn check_state_push(&mut self, i: &Instruction) -> Vec<Need> {
        let (reads, writes) = i.reads_writes();
        let mut out: Vec<Need> = Vec::new();
        self.check_state(i, &SgprUse::of(&reads, &writes), &mut out);
        self.push_regs(i, reads, writes, Some(&out));
        out
    }

    /// [`Scanner::check_push`] for the rules without a window only ([`LOOKBACK`]), given `i`'s
    /// scalar registers `u` (no register decode): returns what those rules find and follows
    /// their state exactly as [`Scanner::check_push`] does. The wait-state history is emptied,
    /// so a caller may check every rule again ([`Scanner::check_push`]) only after
    /// [`LOOKBACK`] instructions pushed that way (or from the first instruction).
    pub fn check_push_state(&mut self, i: &Instruction, u: SgprUse) -> Vec<Need> {
        let mut out: Vec<Need> = Vec::new();
        self.check_state(i, &u, &mut out);
        self.push_state(i, &u, &out);
        self.pushed += 1;
        self.hist.clear();
        out
    }

    /// [`Scanner::check`] given `i`'s registers read and written.
    fn check_regs(&self, i: &Instruction, reads: &RegSet, writes: &RegSet) -> Vec<Need> {
        let mut out: Vec<Need> = Vec::new();
        self.check_window(i, reads, writes, &mut out);
        self.check_state(i, &SgprUse::of(reads, writes), &mut out);
        out
    }

    /// Adds `rule` with producer `p` to `out` unless the rule is already there.
    fn add(out: &mut Vec<Need>, rule: &'static Rule, p: Option<usize>) {
        if !out.iter().any(|n| n.rule == rule) {
            out.push(Need { rule, producer: p });
        }
    }

    /// The wait-state and VALU-count rules (producers in the history).
    fn check_window(&self, i: &Instruction, reads: &RegSet, writes: &RegSet, out: &mut Vec<Need>) {
        let mut add = |rule: &'static Rule, p: Option<usize>| Scanner::add(out, rule, p);
        // Wait-state rules: find the newest producer inside the window. `dist` is the wait
        // states issued after `prev`, `valus` the VALUs after it, `waited` whether a
        // `va_vdst(0)` wait came after it.
        let (mut dist, mut valus, mut waited) = (0u32, 0u32, false);
        // Facts about `i` the loop below asks once per producer.
        // Lane movers are VALU instructions (no mnemonic comparison for the others).
        let i_class = i.class();
        let (i_rwlane, i_vmem) = (i_class == InstClass::Valu && is_rwlane(i), is_vmem(i));
        let lanesel = if i_rwlane && i.mnemonic() != "v_readfirstlane_b32" {
            Some(lane_select(i))
        } else {
            None
        };
        let i_sgprs_m0 = if i_vmem { sgpr_mask(reads, true) } else { 0 };
        let i_hwreg = hwreg(i);
        // Whether `i` reads M0 as the two M0 rules mean it, asked once (at the first SALU write
        // of M0 in the history).
        let mut m0_readers: Option<(bool, bool)> = None;
        // Past the widest window of every rule nothing older can be a producer: `dist`, `valus`
        // and `waited` only grow, so the walk stops there.
        let (max_ws, max_valus) = (self.max_ws, self.max_valus);
        // Every rule below needs a consumer that is a VALU, memory or export instruction, a lane
        // mover, an `s_setreg`/`s_getreg`, or an M0 reader: for any other (most SALU, SMEM and
        // branches) no producer can match, and the walk is skipped.
        // VALU, memory and export instructions: the consumers of MFMA results.
        let i_vector = matches!(
            i_class,
            InstClass::Valu
                | InstClass::Buffer
                | InstClass::Image
                | InstClass::Flat
                | InstClass::Global
                | InstClass::Scratch
                | InstClass::Ds
                | InstClass::Export
        );
        let consumer = i_vector
            || i_rwlane
            || i_hwreg.is_some()
            || m0_msg_reader(i)
            || m0_movrel_reader(i, reads);
        if !consumer {
            return;
        }
        for (p, pw, pc, pf) in &self.hist {
            if dist >= max_ws && (waited || valus >= max_valus) {
                break;
            }
            let pc = *pc;
            let prev_trans = pf.trans;
            let mut window = |rule: &'static Rule, hit: bool| {
                if let Fix::WaitStates(n) = rule.fix {
                    if hit && self.has(rule.scope) && dist < u32::from(n) {
                        add(rule, Some(*p));
                    }
                }
            };
            if pc == InstClass::Salu && pw.contains(SpecialReg::M0) {
                let (msg, movrel) = *m0_readers
                    .get_or_insert_with(|| (m0_msg_reader(i), m0_movrel_reader(i, reads)));
                window(&M0_MSG, msg);
                window(&M0_MOVREL, movrel);
            }
            // SGPRs (and M0) a VALU producer writes; only the two rules below need them.
            let valu_sgprs = || {
                if pc == InstClass::Valu {
                    sgpr_mask(pw, true)
                } else {
                    0
                }
            };
            if let Some(sel) = lanesel {
                let hit = match sel {
                    Some(s) => has(valu_sgprs(), s),
                    None => false,
                };
                window(&VALU_SGPR_LANESEL, hit);
            }
            if i_vmem {
                window(&VALU_SGPR_VMEM, valu_sgprs() & i_sgprs_m0 != 0);
            }
            if let Some(id) = pf.setreg {
                window(&SETREG, id.is_some() && id == i_hwreg);
            }
            if pf.mfma {
                window(
                    &MFMA_RESULT,
                    i_vector && (overlap_v(pw, reads) || overlap_v(pw, writes)),
                );
            }
            if pc == InstClass::Valu {
                window(&VALU_VGPR_RWLANE, i_rwlane && overlap_v(pw, reads));
                window(
                    &TRANS_USE_940,
                    prev_trans
                        && i_class == InstClass::Valu
                        && !is_trans(i)
                        && overlap_v(pw, reads),
                );
            }
            // VALU-counted transcendental forwarding (gfx11, gfx1250).
            if prev_trans && i_class == InstClass::Valu && overlap_v(pw, reads) {
                for rule in [&TRANS_USE_11, &TRANS_USE_1250] {
                    if let Fix::Valus(n) = rule.fix {
                        if self.has(rule.scope) && !waited && valus < u32::from(n) {
                            add(rule, Some(*p));
                        }
                    }
                }
            }
            dist += pf.ws;
            valus += u32::from(pc == InstClass::Valu);
            waited |= pf.va_vdst_wait;
        }
    }

    /// The rules that follow state instead of a window (gfx10.1, gfx12).
    fn check_state(&self, i: &Instruction, u: &SgprUse, out: &mut Vec<Need>) {
        let mut add = |rule: &'static Rule, p: Option<usize>| Scanner::add(out, rule, p);
        // gfx10.1 VMEM SGPR read → SALU/SMEM write.
        if self.has(Scope::Gfx101) && matches!(i.class(), InstClass::Salu | InstClass::Smem) {
            let w = u.write_mask(true);
            if let Some((_, p)) = self.vmem_reads.iter().find(|(s, _)| has(w, *s)) {
                add(&VMEM_SGPR_SALU_WRITE, Some(*p));
            }
        }
        // gfx10.1 LDS / branch / VMEM. The producer reported is the branch: it is what makes
        // the two accesses a hazard (an inserted branch between two original accesses).
        if self.has(Scope::Gfx101) {
            if is_vmem(i) {
                if let Some((_, Some(b))) = self.lds {
                    add(&LDS_BRANCH_VMEM, Some(b));
                }
            }
            if i.class() == InstClass::Ds {
                if let Some((_, Some(b))) = self.vmem {
                    add(&LDS_BRANCH_VMEM, Some(b));
                }
            }
        }
        // gfx12 SGPR hazards.
        if self.has(Scope::Gfx12) {
            let valu = i.class() == InstClass::Valu;
            let salu = i.class() == InstClass::Salu;
            if valu || salu {
                let r = u.read_mask(false);
                if let Some((_, p)) = self.sa.iter().find(|(s, _)| has(r, *s)) {
                    add(&SALU_SGPR_READ, *p);
                }
                if valu {
                    if let Some((_, p)) = self.va.iter().find(|(s, _)| has(r, *s)) {
                        add(&VALU_SGPR_READ, *p);
                    }
                    if let (true, Some(p)) = (u.vcc_read, self.va_vcc) {
                        add(&VALU_VCC_READ, Some(p));
                    }
                }
            }
            let setpc = matches!(
                i.special(),
                Special::SetPc | Special::SwapPc | Special::Call
            );
            if setpc && self.pending_sgpr_writes() {
                let p = self
                    .sa
                    .first()
                    .and_then(|x| x.1)
                    .or(self.va.first().and_then(|x| x.1))
                    .or(self.va_vcc);
                add(&SETPC_PENDING, p);
            }
        }
    }

    /// Records `i` as issued.
    pub fn push(&mut self, i: &Instruction) {
        let (reads, writes) = i.reads_writes();
        self.push_regs(i, reads, writes, None);
    }

    /// [`Scanner::push`] given `i`'s registers read and written ([`Instruction::reads_writes`]),
    /// for a caller that decoded them once for many scans of the same code.
    pub fn push_decoded(&mut self, i: &Instruction, reads: RegSet, writes: RegSet) {
        self.push_regs(i, reads, writes, None);
    }

    /// [`Scanner::push`] given `i`'s registers read and written, and (`checked`) what
    /// [`Scanner::check`] said about `i` before this push, when the caller has it.
    fn push_regs(
        &mut self,
        i: &Instruction,
        reads: RegSet,
        writes: RegSet,
        checked: Option<&[Need]>,
    ) {
        let p = self.pushed;
        let u = SgprUse::of(&reads, &writes);
        let fresh;
        let checked = match checked {
            Some(n) => n,
            None => {
                // Only the stateful rules' needs change the state.
                let mut n = Vec::new();
                self.check_state(i, &u, &mut n);
                fresh = n;
                &fresh[..]
            }
        };
        self.push_state(i, &u, checked);
        self.pushed += 1;
        let class = i.class();
        let facts = Producer {
            trans: class == InstClass::Valu && i.llvm_tsflags() & TSFLAG_TRANS != 0,
            mfma: is_mfma(i),
            setreg: (i.special() == Special::Setreg).then(|| hwreg(i)),
            ws: ws(i, self.t),
            va_vdst_wait: depctr_imm(i).is_some_and(|m| DepField::VaVdst.is_zero_in(m)),
        };
        self.hist.push_front((p, writes, class, facts));
        self.hist.truncate(HISTORY);
    }
}

impl Scanner {
    /// Follows the state of the rules without a window (gfx10.1, gfx12) over `i`, issued at
    /// position `self.pushed`; `checked`: what [`Scanner::check_state`] found for `i` before.
    fn push_state(&mut self, i: &Instruction, u: &SgprUse, checked: &[Need]) {
        let p = self.pushed;
        let class = i.class();
        if self.has(Scope::Gfx101) {
            let resolves = class == InstClass::Valu
                || (i.special() == Special::Waitcnt
                    && i.mnemonic() == "s_waitcnt"
                    && i.field("simm16") == Some(0))
                || depctr_imm(i).is_some_and(|m| DepField::VmVsrc.is_zero_in(m));
            if resolves {
                self.vmem_reads.clear();
            }
            if is_vmem(i) || class == InstClass::Ds {
                for s in sgprs(u.read_mask(true)) {
                    self.vmem_reads.retain(|(x, _)| *x != s);
                    self.vmem_reads.push((s, p));
                }
            }
            if i.mnemonic() == "s_waitcnt_vscnt" && i.field("simm16") == Some(0) {
                self.lds = None;
                self.vmem = None;
            }
            if matches!(i.flow(), crate::Flow::Branch { .. }) {
                self.lds = self.lds.map(|(q, b)| (q, b.or(Some(p))));
                self.vmem = self.vmem.map(|(q, b)| (q, b.or(Some(p))));
            }
            if class == InstClass::Ds {
                self.lds = Some((p, None));
            }
            if is_vmem(i) {
                self.vmem = Some((p, None));
            }
        }
        if self.has(Scope::Gfx12) {
            if matches!(
                class,
                InstClass::Smem | InstClass::Buffer | InstClass::Image
            ) {
                self.sa.clear();
                self.va.clear();
                self.va_vcc = None;
            }
            if let Some(m) = depctr_imm(i) {
                if DepField::SaSdst.is_zero_in(m) {
                    self.sa.clear();
                }
                if DepField::VaSdst.is_zero_in(m) {
                    self.va.clear();
                }
                if DepField::VaVcc.is_zero_in(m) {
                    self.va_vcc = None;
                }
            }
            let valu = class == InstClass::Valu;
            let salu = class == InstClass::Salu;
            // The wait a consumer needs is taken before it issues: its own reads commit.
            // `checked` was found before the commits above; it clears the same fields: a field
            // the commits above emptied stays empty either way, and one they left alone gives
            // the same SGPR-read needs (SETPC_PENDING clears only the SALU field, pending in
            // both states whenever that field is non-empty).
            for n in checked {
                match n.rule.fix {
                    Fix::DepCtr(DepField::SaSdst) => self.sa.clear(),
                    Fix::DepCtr(DepField::VaSdst) => self.va.clear(),
                    Fix::DepCtr(DepField::VaVcc) => self.va_vcc = None,
                    _ => {}
                }
            }
            if salu {
                if u.read_mask(false) != 0 {
                    self.va.clear();
                }
                if u.vcc_read {
                    self.va_vcc = None;
                }
            }
            if valu || salu {
                for s in sgprs(u.write_mask(false)) {
                    if salu {
                        self.sa.retain(|(x, _)| *x != s);
                        self.sa.push((s, Some(p)));
                    } else {
                        self.va.retain(|(x, _)| *x != s);
                        self.va.push((s, Some(p)));
                    }
                }
                if valu && u.vcc_write {
                    self.va_vcc = Some(p);
                }
            }
        }
    }
}

/// Wait states an instruction provides (`s_nop n`: n + 1; the hardware reads 4 bits of n on
/// gfx9/gfx10 and 7 bits later, ISA manuals "SOPP").
pub fn ws(i: &Instruction, t: Target) -> u32 {
    if i.special() == Special::Nop {
        let mask = if matches!(t.family(), Family::Gfx9 | Family::Gfx10) {
            0xf
        } else {
            0x7f
        };
        i.field("simm16").map_or(1, |n| (n & mask) + 1)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    //! Encodings from `llvm-mc-22 -show-encoding`; expected waits from `llc-22 -run-pass=
    //! post-RA-hazard-rec` / `amdgpu-wait-sgpr-hazards` on the same sequences (docs/hazards.md).
    use super::*;
    use crate::build::{self, Operand};
    use crate::decode;

    const READFIRSTLANE_S5_V1: [u8; 4] = [0x01, 0x05, 0x0a, 0x7e];
    const EXP_V0_V1_GFX11: [u8; 4] = [0x01, 0x4b, 0x00, 0x7e];

    fn ids(t: Target, seq: &[Instruction]) -> Vec<&'static str> {
        let (last, before) = seq.split_last().expect("non-empty");
        let mut s = Scanner::new(t);
        for i in before {
            s.push(i);
        }
        s.check(last).iter().map(|n| n.rule.id).collect()
    }

    fn t(n: &str) -> Target {
        Target::from_name(n).expect("known target")
    }

    #[test]
    fn m0_write_then_ttracedata_needs_one_wait_state_on_gfx9_only() {
        for (name, want) in [
            ("gfx900", vec!["m0-msg"]),
            ("gfx942", vec!["m0-msg"]),
            ("gfx1100", vec![]),
        ] {
            let t = t(name);
            let mov = build::s_mov_b32(t, Operand::M0, Operand::Imm(5)).unwrap();
            let tt = build::s_ttracedata(t).unwrap();
            assert_eq!(ids(t, &[mov, tt]), want, "{name}");
            let nop = build::s_nop(t, 0).unwrap();
            assert!(ids(t, &[mov, nop, tt]).is_empty(), "{name}");
        }
    }

    #[test]
    fn valu_sgpr_write_then_lane_select_needs_four_wait_states_on_gfx9() {
        let t = t("gfx900");
        let rfl = decode(&READFIRSTLANE_S5_V1, t).unwrap();
        let rl = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(5)).unwrap();
        assert_eq!(ids(t, &[rfl, rl]), vec!["valu-sgpr-lanesel"]);
        let nop2 = build::s_nop(t, 2).unwrap();
        assert_eq!(ids(t, &[rfl, nop2, rl]), vec!["valu-sgpr-lanesel"]);
        let nop3 = build::s_nop(t, 3).unwrap();
        assert!(ids(t, &[rfl, nop3, rl]).is_empty());
        // Lane select s7 is not the written s5.
        let rl7 = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(7)).unwrap();
        assert!(ids(t, &[rfl, rl7]).is_empty());
    }

    #[test]
    fn gfx12_sgpr_waits_follow_the_commit_model() {
        let t = t("gfx1200");
        let mov = build::s_mov_b32(t, Operand::Sgpr(5), Operand::Imm(1)).unwrap();
        let rl = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(5)).unwrap();
        let m0 = build::s_mov_b32(t, Operand::M0, Operand::Sgpr(5)).unwrap();
        assert_eq!(ids(t, &[mov, rl]), vec!["salu-sgpr-read"]);
        assert_eq!(ids(t, &[mov, m0]), vec!["salu-sgpr-read"]);
        let w = build::s_wait_alu(t, DepField::SaSdst.wait_imm()).unwrap();
        assert!(ids(t, &[mov, w, rl]).is_empty());
        let rfl = decode(&READFIRSTLANE_S5_V1, t).unwrap();
        assert_eq!(ids(t, &[rfl, rl]), vec!["valu-sgpr-read"]);
        // A VALU-written SGPR read by SALU needs nothing, and that read commits VALU writes.
        assert!(ids(t, &[rfl, m0]).is_empty());
        assert!(ids(t, &[rfl, m0, rl]).is_empty());
        assert_eq!(DepField::SaSdst.wait_imm(), 0xfffe);
        assert_eq!(DepField::VaSdst.wait_imm(), 0xf1ff);
        assert!(DepField::VaSdst.is_zero_in(0xf19f));
        assert!(DepField::VaVdst.is_zero_in(0x0f9f));
    }

    #[test]
    fn transcendental_result_read_by_readlane() {
        for (name, want) in [("gfx1100", 6usize), ("gfx1250", 1)] {
            let t = t(name);
            let exp = decode(&EXP_V0_V1_GFX11, t).unwrap();
            let rl = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(5)).unwrap();
            let salu = build::s_mov_b32(t, Operand::Sgpr(20), Operand::Imm(1)).unwrap();
            let valu = build::v_readlane_b32(t, Operand::Sgpr(7), 9, Operand::Sgpr(5)).unwrap();
            let mut seq = vec![exp];
            seq.extend(std::iter::repeat_n(salu, 9));
            seq.push(rl);
            assert_eq!(
                ids(t, &seq),
                vec!["trans-use"],
                "{name}: SALUs do not count"
            );
            let mut seq = vec![exp];
            seq.extend(std::iter::repeat_n(valu, want - 1));
            seq.push(rl);
            assert_eq!(ids(t, &seq), vec!["trans-use"], "{name}");
            seq.insert(1, valu);
            assert!(ids(t, &seq).is_empty(), "{name}");
        }
    }

    /// Instructions that hit the rules of `name` (= `t`'s name) when issued in random order.
    fn sample_pool(t: Target, name: &str) -> Vec<Instruction> {
        let s = |n| Operand::Sgpr(n);
        let mut pool = vec![
            build::s_mov_b32(t, s(5), Operand::Imm(1)).unwrap(),
            build::s_mov_b32(t, s(7), s(5)).unwrap(),
            build::s_mov_b32(t, Operand::M0, s(5)).unwrap(),
            build::s_mov_b32(t, s(6), Operand::VccLo).unwrap(),
            build::v_readlane_b32(t, s(6), 0, s(5)).unwrap(),
            build::v_readlane_b32(t, s(5), 1, s(7)).unwrap(),
            build::v_writelane_b32(t, 2, s(6), s(5)).unwrap(),
            build::s_add_u32(t, s(8), s(6), Operand::Imm(3)).unwrap(),
            build::s_nop(t, 1).unwrap(),
            build::s_ttracedata(t).unwrap(),
            build::s_branch(t, 0).unwrap(),
            build::s_cbranch_vccz(t, 0).unwrap(),
            build::s_setpc_b64(t, 8).unwrap(),
            build::s_getreg_b32(t, s(9), 1, 0, 4).unwrap(),
        ];
        if t.family() == Family::Gfx12 {
            pool.push(build::s_wait_alu(t, DepField::SaSdst.wait_imm()).unwrap());
            pool.push(build::s_wait_alu(t, DepField::VaSdst.wait_imm()).unwrap());
        }
        if matches!(t.family(), Family::Gfx10 | Family::Gfx11) {
            pool.push(build::s_waitcnt_depctr(t, DepField::VmVsrc.wait_imm()).unwrap());
            pool.push(build::s_waitcnt_vscnt(t, 0).unwrap());
        }
        if name == "gfx1100" {
            // A transcendental VALU writing v0, which `v_readlane_b32 .., v0, ..` reads.
            pool.push(decode(&EXP_V0_V1_GFX11, t).unwrap());
        }
        if name == "gfx1010" {
            // llvm-mc-22 -mcpu=gfx1010: `global_load_dword v1, v2, s[4:5]`,
            // `ds_read_b32 v1, v2`; and a SALU write of s4.
            pool.push(decode(&[0x00, 0x80, 0x30, 0xdc, 0x02, 0x00, 0x04, 0x01], t).unwrap());
            pool.push(decode(&[0x00, 0x00, 0xd8, 0xd8, 0x02, 0x00, 0x00, 0x01], t).unwrap());
            pool.push(build::s_mov_b32(t, s(4), Operand::Imm(2)).unwrap());
        }
        pool
    }

    /// The next value of a xorshift64 sequence in `x`.
    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// `push_if_clear` answers as `check` and, when that is empty, pushes as `push` does (the
    /// snippet emitter's one-decode path): two scanners over the same pseudo-random sequences
    /// stay in step.
    #[test]
    fn push_if_clear_is_check_then_push_when_clear() {
        for name in ["gfx900", "gfx1010", "gfx1100", "gfx1200"] {
            let t = t(name);
            let pool = sample_pool(t, name);
            let mut x = 0x2545_f491_4f6c_dd1du64;
            let (mut clear, mut violated) = (0, 0);
            for _ in 0..20 {
                let (mut a, mut b) = (Scanner::new(t), Scanner::new(t));
                for k in 0..300 {
                    let i = pool[(xorshift(&mut x) % pool.len() as u64) as usize];
                    let want = b.check(&i);
                    b.push(&i);
                    let got = a.push_if_clear(&i);
                    assert_eq!(got, want, "{name} position {k}");
                    if got.is_empty() {
                        clear += 1;
                    } else {
                        // Not pushed yet: issue it anyway, as `b` did.
                        violated += 1;
                        a.push(&i);
                    }
                    assert_eq!(a.position(), b.position());
                }
            }
            assert!(
                clear > 0 && violated > 0,
                "{name}: {clear} clear, {violated} violated"
            );
        }
    }

    /// `check_push_state` (no register decode, no history) follows the stateful rules exactly as
    /// `check_push`, and after [`LOOKBACK`] full pushes every rule is checked as in a scan that
    /// never skipped: the premise of the verifier's scan limited to code near inserted
    /// instructions. Pseudo-random sequences over SALU/VALU SGPR and VCC writers and readers,
    /// SGPR waits, `s_setpc`, branches and M0 readers.
    #[test]
    fn state_only_pushes_follow_the_same_state() {
        for name in ["gfx900", "gfx1010", "gfx1100", "gfx1200"] {
            let t = t(name);
            let pool = sample_pool(t, name);
            let stateful = |n: &Need| matches!(n.rule.fix, Fix::DepCtr(_) | Fix::VsCntZero);
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut hits = 0;
            for _ in 0..40 {
                let (mut full, mut part) = (Scanner::new(t), Scanner::new(t));
                // Positions since the last state-only push (`None`: none yet).
                let mut since: Option<usize> = None;
                for k in 0..400 {
                    let i = pool[(xorshift(&mut x) % pool.len() as u64) as usize];
                    let want = full.check_push(&i);
                    hits += want.len();
                    if (k / 90) % 2 == 1 {
                        let got = part.check_push_state(&i, SgprUse::of(&i.reads(), &i.writes()));
                        let want: Vec<Need> = want.into_iter().filter(stateful).collect();
                        assert_eq!(got, want, "{name} position {k}: state-only push");
                        since = Some(0);
                        continue;
                    }
                    let got = part.check_push(&i);
                    if since.is_none_or(|n| n >= LOOKBACK) {
                        assert_eq!(got, want, "{name} position {k}: full history again");
                    } else {
                        let (g, w): (Vec<Need>, Vec<Need>) = (
                            got.into_iter().filter(stateful).collect(),
                            want.into_iter().filter(stateful).collect(),
                        );
                        assert_eq!(g, w, "{name} position {k}: stateful rules");
                    }
                    since = since.map(|n| n + 1);
                }
                assert_eq!(full.position(), part.position());
            }
            assert!(hits > 0, "{name}: the sequences hit no rule");
        }
    }

    #[test]
    fn setreg_then_getreg_of_the_same_register_on_gfx9() {
        let t = t("gfx900");
        let set = decode(&[0x01, 0x18, 0x01, 0xb9], t).unwrap();
        let same = build::s_getreg_b32(t, Operand::Sgpr(2), 1, 0, 4).unwrap();
        let other = build::s_getreg_b32(t, Operand::Sgpr(2), 4, 0, 4).unwrap();
        assert_eq!(ids(t, &[set, same]), vec!["setreg"]);
        assert!(ids(t, &[set, other]).is_empty());
    }
}
