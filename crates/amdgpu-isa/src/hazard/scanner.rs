//! The straight-line hazard scanner (part of [`crate::hazard`]): the state [`Scanner`] keeps
//! over issued instructions and the checks of every rule in [`super::RULES`] against it.

use std::collections::VecDeque;

use super::*;
use crate::{Family, InstClass, Instruction, RegSet, Special, SpecialReg, Target};

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

/// VALU, memory and export instructions: the consumers of MFMA results.
fn is_vector(class: InstClass) -> bool {
    matches!(
        class,
        InstClass::Valu
            | InstClass::Buffer
            | InstClass::Image
            | InstClass::Flat
            | InstClass::Global
            | InstClass::Scratch
            | InstClass::Ds
            | InstClass::Export
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

    /// Whether `i`, issued next, can violate a rule of this scanner's target whose producer was
    /// issued before it, whatever was issued: when this is false, [`Scanner::check`] of `i` is
    /// empty after any history (the consumer side of every rule in [`super::RULES`], as
    /// [`Scanner::check_window`] and [`Scanner::check_state`] test it). For a caller that checks
    /// one block after many different histories (the rewriter's entry waits) and can skip the
    /// histories of a block without such an instruction.
    pub fn may_consume(&self, i: &Instruction) -> bool {
        let (reads, writes) = i.reads_writes();
        let class = i.class();
        // The window rules, each in its scope, with the consumer test of `check_window`.
        let valu = class == InstClass::Valu;
        let gfx9 = self.has(Scope::Gfx9)
            && (m0_msg_reader(i)
                || m0_movrel_reader(i, &reads)
                || (valu && is_rwlane(i))
                || is_vmem(i)
                || hwreg(i).is_some());
        let window = gfx9
            || (self.has(Scope::Mfma) && is_vector(class))
            || (valu
                && (self.has(Scope::Gfx940) || self.has(Scope::Gfx11) || self.has(Scope::Gfx1250)));
        if window {
            return true;
        }
        let u = SgprUse::of(&reads, &writes);
        let gfx101 = self.has(Scope::Gfx101)
            && ((matches!(class, InstClass::Salu | InstClass::Smem) && u.write_mask(true) != 0)
                || is_vmem(i)
                || class == InstClass::Ds);
        let gfx12 = self.has(Scope::Gfx12)
            && ((matches!(class, InstClass::Salu | InstClass::Valu) && u.read_mask(false) != 0)
                || (class == InstClass::Valu && u.vcc_read)
                || matches!(
                    i.special(),
                    Special::SetPc | Special::SwapPc | Special::Call
                ));
        gfx101 || gfx12
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
        let i_vector = is_vector(i_class);
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
