//! Waits at the entry of an inserted block for hazards whose producer is original code before it
//! (issue 29 item 3): a snippet is built without knowing the instructions in front of its
//! insertion point, so an address VGPR written by a transcendental VALU (gfx11/gfx1250
//! `trans-use`) or an MFMA (`mfma-result`) right before the traced instruction would reach the
//! snippet's `v_readlane_b32` too early.
//!
//! [`entry_waits`] walks the finished block through [`hazard::Scanner`] (the verifier's scanner)
//! after each given run of preceding original instructions, and puts the fix of every rule
//! violated with an original producer in front of the block: `s_nop` for wait-state rules (they
//! then lie between the producer and every instruction of the block), one dependency-counter wait
//! (`s_waitcnt_depctr`, gfx12 `s_wait_alu`) with every needed field at 0 for the others, the
//! VALU-count rules taking `va_vdst(0)` (LLVM 22 `GCNHazardRecognizer::fixVALUTransUseHazard`
//! resolves them the same way). Waits at the front keep the block's inner branches valid.

use amdgpu_isa::build;
use amdgpu_isa::hazard::{self, DepField, Fix, Scanner};
use amdgpu_isa::{Family, Instruction, RegSet, Target};

use super::SnippetError;

/// The fixes one block needs in front of it.
#[derive(Default)]
struct Front {
    /// Wait states (largest of the wait-state rules).
    states: u8,
    /// Dependency-counter fields to wait for.
    fields: Vec<DepField>,
    /// `s_waitcnt_vscnt null, 0`.
    vscnt: bool,
}

impl Front {
    fn add(&mut self, fix: Fix) {
        match fix {
            Fix::WaitStates(n) => self.states = self.states.max(n),
            Fix::Valus(_) => self.field(DepField::VaVdst),
            Fix::DepCtr(f) => self.field(f),
            Fix::VsCntZero => self.vscnt = true,
        }
    }

    fn field(&mut self, f: DepField) {
        if !self.fields.contains(&f) {
            self.fields.push(f);
        }
    }

    fn is_empty(&self) -> bool {
        self.states == 0 && self.fields.is_empty() && !self.vscnt
    }

    /// The instructions, in the order: dependency-counter wait, `s_waitcnt_vscnt`, `s_nop`s
    /// (at most 8 wait states each: `s_nop 7` is valid on every generation).
    fn code(&self, t: Target) -> Result<Vec<Instruction>, SnippetError> {
        let enc = |what: &'static str, r: Result<Instruction, amdgpu_isa::EncodeError>| {
            r.map_err(|source| SnippetError::Encode {
                what,
                target: t.name(),
                source,
            })
        };
        let mut out = Vec::new();
        if !self.fields.is_empty() {
            let imm = self.fields.iter().fold(0xffffu16, |m, f| m & f.wait_imm());
            out.push(if matches!(t.family(), Family::Gfx12 | Family::Gfx1250) {
                enc("s_wait_alu", build::s_wait_alu(t, imm))?
            } else {
                enc("s_waitcnt_depctr", build::s_waitcnt_depctr(t, imm))?
            });
        }
        if self.vscnt {
            out.push(enc("s_waitcnt_vscnt", build::s_waitcnt_vscnt(t, 0))?);
        }
        let mut left = u16::from(self.states);
        while left > 0 {
            let n = left.min(8);
            out.push(enc("s_nop", build::s_nop(t, n - 1))?);
            left -= n;
        }
        Ok(out)
    }
}

/// One original instruction of a context with the registers it reads and writes
/// ([`Instruction::reads_writes`], decoded once by the caller for every context it is in).
pub type Decoded = (Instruction, RegSet, RegSet);

/// The rules `code` violates, run after `before` (original instructions, oldest first), whose
/// producer is in `before`; their fixes are added to `front`.
fn original_needs(t: Target, before: &[Decoded], code: &[Instruction], front: &mut Front) {
    let mut sc = Scanner::new(t);
    for (i, reads, writes) in before {
        sc.push_decoded(i, *reads, *writes);
    }
    let base = sc.position();
    for i in code {
        for need in sc.check_push(i) {
            if need.producer.is_some_and(|p| p < base) {
                front.add(need.rule.fix);
            }
        }
    }
}

/// Whether some instruction of `code` can violate a hazard rule whose producer is code before
/// the block ([`Scanner::may_consume`]): when none can, the block needs no entry waits after
/// any code, and its contexts need not be built or scanned.
pub fn needs_entry_check(t: Target, code: &[Instruction]) -> bool {
    let sc = Scanner::new(t);
    code.iter().any(|i| sc.may_consume(i))
}

/// `code` (an inserted block, entered at its first instruction) with the waits in front that
/// the hazards from original code before it need. `contexts`: each way into the block, as the
/// original instructions executed just before it, oldest first, with their registers (the last
/// [`hazard::LOOKBACK`] are enough). Errors: [`SnippetError::Rule`] when the block still violates
/// a rule with an original producer after the waits (not expected: every fix resolves its rule),
/// or an encoding error. A caller that knows [`needs_entry_check`] is false need not build the
/// contexts: the answer is `code` unchanged.
pub fn entry_waits(
    t: Target,
    contexts: &[&[Decoded]],
    code: Vec<Instruction>,
) -> Result<Vec<Instruction>, SnippetError> {
    let tail = |c: &[Decoded]| c.len().saturating_sub(hazard::LOOKBACK);
    let mut front = Front::default();
    for c in contexts {
        original_needs(t, &c[tail(c)..], &code, &mut front);
    }
    if front.is_empty() {
        return Ok(code);
    }
    let mut out = front.code(t)?;
    out.extend(code);
    for c in contexts {
        let mut again = Front::default();
        original_needs(t, &c[tail(c)..], &out, &mut again);
        if !again.is_empty() {
            return Err(SnippetError::Rule(
                "entry waits do not resolve a hazard from the code before the block".into(),
            ));
        }
    }
    Ok(out)
}
