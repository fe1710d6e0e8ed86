//! Execution of inserted runs ("instrumentation regions") on the `sqtt-interp` model wave with
//! random register states, and the checks on what comes out: termination by falling through to
//! the run's end, untouched architectural state outside the changeable SGPRs / M0 / SCC, the
//! shaderdata framing of the spec ("Marker Encoding", "Funcmap format" `R:` rows, "Address
//! Tracing" / "Framing protocol", "Scope filtering", "GFX12 Shader Clock Packing").

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use amdgpu_isa::{build, InstClass, Target};
use sqtt_interp::{run_code, Code, InterpError, Wave};

use crate::program::Layout;
use crate::Check;

/// Instructions one execution of a run may take before it counts as not terminating. The largest
/// legitimate run, a wave64 struct-buffer address trace, takes about 2,000.
pub(crate) const MAX_STEPS: usize = 200_000;

/// What the verifier knows about the object for executing runs.
pub(crate) struct Env<'a> {
    pub target: Target,
    /// Lanes of the waves executing the function (32 or 64).
    pub wave_size: u32,
    /// SGPRs no original instruction uses: their values on entry are unknown to a run.
    pub free: &'a [u16],
    /// The scope-filter flag SGPR, an input of every run (0 and 1 are tried).
    pub scope_flag: Option<u16>,
    pub layout: Layout,
    /// `R:id:extra_payload_count=N` rows.
    pub payload: &'a BTreeMap<u32, u32>,
    /// Names of the marker rows (`F`/`U`/`P`) by id.
    pub names: &'a BTreeMap<u32, String>,
    /// Outcomes of the entries executed so far in this function that raised no problem, by
    /// what the execution depends on ([`RunKey`]): a run the rewrite inserted at many sites
    /// (the same marker, guard and SCC save) is executed once per function.
    pub runs: RefCell<HashMap<RunKey, Exec>>,
}

/// Everything an execution of an entry depends on besides [`Env`]: the run's bytes, where in
/// them it is entered, and the inputs of [`Entry`]. The interpreter models no instruction that
/// reads the PC (`s_getpc*` stops it with an error, which is a problem and never stored), and
/// branches are PC-relative, so the outcome does not depend on the run's address. The trade-off:
/// identical entries of a function share the random register states of the first one executed
/// (each is still tried with its trials, zeroed instrumentation SGPRs and both scope-flag values),
/// where before every site drew its own.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct RunKey {
    code: Vec<u8>,
    /// Entry point: bytes from the run's start.
    landing: u64,
    frame: bool,
    deterministic: bool,
    trials: usize,
    vgprs: Vec<u16>,
    changeable: u128,
    m0: Option<u32>,
}

/// Outcome of executing one run from one entry.
#[derive(Clone)]
pub(crate) struct Exec {
    /// M0 at the end equals M0 at the start in every trial.
    pub m0_preserved: bool,
    /// M0 at the end is this constant in every trial (inputs differ between trials).
    pub m0_const: Option<u32>,
    /// SCC at the end differs from SCC at the start in some trial.
    pub scc_changed: bool,
    /// Marker headers (payload words removed, clock field cleared) of an in-scope trial.
    pub headers: Vec<u32>,
    pub problems: Vec<(Check, String)>,
}

/// A small deterministic generator (xorshift64*), seeded per run so results are reproducible.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

/// How one run is entered: its bytes `[start, end)` and the entry address inside it.
pub(crate) struct Entry<'a> {
    pub code: &'a [u8],
    pub start: u64,
    pub landing: u64,
    /// Whether a framing error is a finding (whole-run entries). A mid-run (branch) entry's
    /// headers are used when they frame and ignored otherwise.
    pub frame: bool,
    /// Whether marker headers must not depend on register values (runs beyond simple snippets).
    pub deterministic: bool,
    /// Trials per scope-flag value.
    pub trials: usize,
    /// VGPRs the run reads (randomised; the others stay 0).
    pub vgprs: &'a [u16],
    /// SGPRs the run may change (bit n = s<n>): dead in the original program where it runs.
    pub changeable: u128,
    /// M0 where the run is entered, when the original program has this constant there on every
    /// path (every trial starts from it); `None`: a random M0 per trial.
    pub m0: Option<u32>,
}

thread_local! {
    /// A model wave left by the last [`execute`] on this thread, in the state [`Wave::new`]
    /// gives (every VGPR zero): allocating and zeroing the 256 VGPRs of a fresh wave for every
    /// run entry cost more than executing most runs.
    static SPARE: RefCell<Option<Wave>> = const { RefCell::new(None) };
}

/// A wave as [`Wave::new`] makes it, reusing this thread's spare one when it fits.
fn take_wave(target: Target, wave_size: u32) -> Result<Wave, InterpError> {
    let spare = SPARE.with(|s| s.borrow_mut().take());
    match spare {
        Some(w) if w.target == target && w.wave_size == wave_size => Ok(w),
        _ => Wave::new(target, wave_size),
    }
}

/// Returns `w` to this thread's spare slot in the state of [`Wave::new`]: the VGPRs `touched`
/// (randomised) and every VGPR a vector instruction of `code` that executed names are zeroed
/// (no other VGPR can have changed: scalar instructions name none), the hardware registers
/// emptied, the scalar state reset.
fn give_back(mut w: Wave, touched: &[u16], code: &Code) {
    let mut dirty = amdgpu_isa::RegSet::new();
    for i in code
        .decoded()
        .filter(|i| !matches!(i.class(), InstClass::Salu | InstClass::Branch))
    {
        let (r, wr) = i.reads_writes();
        dirty.union_with(&r);
        dirty.union_with(&wr);
    }
    for &v in touched {
        if let Some(row) = w.vgpr.get_mut(usize::from(v)) {
            *row = [0; 64];
        }
    }
    if let Some(top) = dirty.max_vgpr() {
        for v in 0..=top {
            if dirty.contains_vgpr(v) {
                if let Some(row) = w.vgpr.get_mut(usize::from(v)) {
                    *row = [0; 64];
                }
            }
        }
    }
    debug_assert!(w.vgpr.iter().all(|r| r.iter().all(|&x| x == 0)));
    w.sgpr = [0; sqtt_interp::NUM_SGPRS];
    w.exec = w.lane_mask();
    w.vcc = 0;
    w.scc = false;
    w.m0 = 0;
    w.hwreg.clear();
    w.shader_cycles = 0;
    SPARE.with(|s| *s.borrow_mut() = Some(w));
}

/// Executes one run entry over several random states (seeded by the entry's address), or
/// returns the outcome of an identical entry of the same function that raised no problem ([`RunKey`]).
/// See the module docs for the checks.
pub(crate) fn execute(env: &Env, e: &Entry) -> Exec {
    let key = RunKey {
        code: e.code.to_vec(),
        landing: e.landing.wrapping_sub(e.start),
        frame: e.frame,
        deterministic: e.deterministic,
        trials: e.trials,
        vgprs: e.vgprs.to_vec(),
        changeable: e.changeable,
        m0: e.m0,
    };
    if let Some(x) = env.runs.borrow().get(&key) {
        return x.clone();
    }
    let out = execute_uncached(env, e);
    if out.problems.is_empty() {
        env.runs.borrow_mut().insert(key, out.clone());
    }
    out
}

/// [`execute`] without the per-function store of outcomes.
fn execute_uncached(env: &Env, e: &Entry) -> Exec {
    let mut out = Exec {
        m0_preserved: true,
        m0_const: None,
        scc_changed: false,
        headers: Vec::new(),
        problems: Vec::new(),
    };
    // Entering mid-run: a leading `s_branch` to the landing, so backward branches stay inside.
    let (code, base) = if e.landing == e.start {
        (e.code.to_vec(), e.start)
    } else {
        let simm = (e.landing.saturating_sub(e.start) / 4) as i16;
        match build::s_branch(env.target, simm) {
            Ok(b) => {
                let mut c = b.bytes().to_vec();
                c.extend_from_slice(e.code);
                (c, e.start.wrapping_sub(4))
            }
            Err(err) => {
                out.problems.push((
                    Check::Inserted,
                    format!("cannot model the entry at {:#x}: {err}", e.landing),
                ));
                return out;
            }
        }
    };
    let mut w = match take_wave(env.target, env.wave_size) {
        Ok(w) => w,
        Err(err) => {
            out.problems
                .push((Check::Inserted, format!("cannot model the wave: {err}")));
            return out;
        }
    };
    let mut prog = Code::new(&code, base);
    trials(env, e, &mut w, &mut prog, &mut out);
    give_back(w, e.vgprs, &prog);
    out
}

/// The trials of [`execute`] on the wave `w` and the code `prog`, into `out`.
fn trials(env: &Env, e: &Entry, w: &mut Wave, prog: &mut Code, out: &mut Exec) {
    let end = e.start + e.code.len() as u64;
    let flags: &[Option<u32>] = if env.scope_flag.is_some() {
        &[Some(0), Some(1)]
    } else {
        &[None]
    };
    let mut rng = Rng(e.landing ^ 0x9e37_79b9_7f4a_7c15);
    let mut m0_outs = Vec::new();
    let mut in_scope_headers: Option<Vec<u32>> = None;
    let mut reported_scope = false;
    for &flag in flags {
        for t in 0..e.trials {
            randomise(w, e.vgprs, t, &mut rng);
            if let Some(m0) = e.m0 {
                w.m0 = m0;
            }
            if t == 1 {
                // No value of an instrumentation-owned SGPR may be assumed on entry: try them all
                // zero once (the scope flag is set below).
                for &r in env.free {
                    if let Some(x) = w.sgpr.get_mut(usize::from(r)) {
                        *x = 0;
                    }
                }
            }
            if let (Some(r), Some(v)) = (env.scope_flag, flag) {
                w.sgpr[usize::from(r)] = v;
            }
            let before = Snapshot::of(w);
            let r = match run_code(w, prog, MAX_STEPS) {
                Ok(r) => r,
                Err(InterpError::StepLimit { max_steps, pc }) => {
                    out.problems.push((
                        Check::Inserted,
                        format!("inserted run does not terminate: {max_steps} instructions executed, at {pc:#x}"),
                    ));
                    return;
                }
                Err(err) => {
                    out.problems.push((
                        Check::Inserted,
                        format!("inserted run cannot be executed by the model: {err}"),
                    ));
                    return;
                }
            };
            if r.exit_pc != end {
                out.problems.push((
                    Check::Inserted,
                    format!(
                        "inserted run leaves at {:#x} instead of falling through to {end:#x}",
                        r.exit_pc
                    ),
                ));
                return;
            }
            if let Some(what) = changed_state(e.changeable, &before, w) {
                out.problems
                    .push((Check::Inserted, format!("inserted run changes {what}")));
                return;
            }
            if w.m0 != before.m0 {
                out.m0_preserved = false;
            }
            m0_outs.push(w.m0);
            out.scc_changed |= w.scc != before.scc;
            let flag_out = env.scope_flag.map(|r| w.sgpr[usize::from(r)]);
            if flag_out == Some(0) {
                if !r.shaderdata.is_empty() && !reported_scope {
                    reported_scope = true;
                    out.problems.push((
                        Check::Markers,
                        format!(
                            "inserted run emits {} shaderdata word(s) although the scope flag s{} is 0",
                            r.shaderdata.len(),
                            env.scope_flag.unwrap_or_default()
                        ),
                    ));
                }
                continue;
            }
            // A branch entry mid-run (`!e.frame`) runs a suffix of the snippets: its headers
            // count for the scope balance whenever they frame (a landing between snippets);
            // one that lands inside a payload sequence cannot be framed and is not counted.
            let headers = match frame(env, &before, &r.shaderdata) {
                Ok(h) => h,
                Err(_) if !e.frame => continue,
                Err(msg) => {
                    out.problems.push((Check::Markers, msg));
                    return;
                }
            };
            match &in_scope_headers {
                None => in_scope_headers = Some(headers),
                Some(h) if e.deterministic && *h != headers => {
                    out.problems.push((
                        Check::Markers,
                        format!(
                            "marker headers depend on register values: {} vs {}",
                            hexes(h),
                            hexes(&headers)
                        ),
                    ));
                    return;
                }
                Some(_) => {}
            }
        }
    }
    let first = m0_outs.first().copied();
    if !out.m0_preserved && m0_outs.iter().all(|v| Some(*v) == first) {
        out.m0_const = first;
    }
    out.headers = in_scope_headers.unwrap_or_default();
}

fn hexes(v: &[u32]) -> String {
    let s: Vec<String> = v.iter().map(|x| format!("{x:#x}")).collect();
    format!("[{}]", s.join(","))
}

/// The scalar state of a wave before a trial (VGPRs cannot change: no whitelisted instruction
/// writes one, and runs with other instructions are not executed).
struct Snapshot {
    sgpr: [u32; sqtt_interp::NUM_SGPRS],
    exec: u64,
    vcc: u64,
    m0: u32,
    scc: bool,
    shader_cycles: u64,
    lanes: u64,
}

impl Snapshot {
    fn of(w: &Wave) -> Snapshot {
        Snapshot {
            sgpr: w.sgpr,
            exec: w.exec,
            vcc: w.vcc,
            m0: w.m0,
            scc: w.scc,
            shader_cycles: w.shader_cycles,
            lanes: w.lane_mask(),
        }
    }
}

/// Random SGPRs, EXEC, VCC, M0, HW_ID registers, shader clock, random VGPRs `vgprs`, and SCC
/// alternating between trials. Trial 0 runs with all lanes active and zero hardware IDs,
/// trial 1 with all-ones hardware IDs.
fn randomise(w: &mut Wave, vgprs: &[u16], t: usize, rng: &mut Rng) {
    for s in w.sgpr.iter_mut() {
        *s = rng.next_u32();
    }
    for &v in vgprs {
        if let Some(r) = w.vgpr.get_mut(usize::from(v)) {
            for l in r.iter_mut() {
                *l = rng.next_u32();
            }
        }
    }
    let lanes = w.lane_mask();
    w.exec = if t == 0 {
        lanes
    } else {
        rng.next_u64() & lanes
    };
    w.vcc = rng.next_u64();
    w.scc = t % 2 == 1;
    w.m0 = rng.next_u32();
    w.shader_cycles = rng.next_u64();
    // HW_ID (gfx9), HW_ID1 / HW_ID2 (gfx10+).
    for id in [4u8, 23, 24] {
        let v = match t {
            0 => 0,
            1 => u32::MAX,
            _ => rng.next_u32(),
        };
        w.hwreg.insert(id, v);
    }
}

/// The first architectural register a run changed that it may not change (everything but the
/// `changeable` SGPRs, M0 and SCC).
fn changed_state(changeable: u128, a: &Snapshot, b: &Wave) -> Option<String> {
    if a.exec != b.exec {
        return Some("EXEC".into());
    }
    if a.vcc != b.vcc {
        return Some("VCC".into());
    }
    if let Some(r) = (0..a.sgpr.len())
        .find(|&r| a.sgpr[r] != b.sgpr[r] && (r >= 128 || changeable >> r & 1 == 0))
    {
        return Some(format!(
            "s{r}, which is live or awaiting an SMEM result there"
        ));
    }
    None
}

/// Splits a shaderdata stream into marker headers and their `R:` payloads. Errors describe the
/// first framing violation.
fn frame(env: &Env, before: &Snapshot, words: &[u32]) -> Result<Vec<u32>, String> {
    let mut headers = Vec::new();
    let mut i = 0usize;
    let mut prev: Option<(u32, u32)> = None;
    while let Some(&v) = words.get(i) {
        let legacy = env.layout.strip(v);
        let id = legacy >> 2;
        if let Layout::Packed { bits, shift } = env.layout {
            let want = ((before.shader_cycles >> shift) as u32) & ((1u32 << bits) - 1);
            let got = v >> (32 - bits);
            if got != want {
                return Err(format!(
                    "packed marker {v:#x}: clock field {got:#x} is not shader cycles bits [{shift}, {}) = {want:#x}",
                    shift + bits
                ));
            }
        }
        if let Some((pid, n)) = prev.filter(|_| id != 0 && !env.names.contains_key(&id)) {
            return Err(format!(
                "payload count mismatch: header id {pid} declares extra_payload_count={n}, word {v:#x} after its payload is not a marker with a funcmap row"
            ));
        }
        let n = if id != 0 && legacy & 1 == 0 {
            env.payload.get(&id).copied().unwrap_or(0)
        } else {
            0
        };
        let rest = words.len() - i - 1;
        if (n as usize) > rest {
            return Err(format!(
                "payload count mismatch: header id {id} declares extra_payload_count={n}, only {rest} word(s) follow"
            ));
        }
        let is_addr = env
            .names
            .get(&id)
            .is_some_and(|nm| nm.starts_with("addr_trace_"));
        if is_addr && n >= 2 {
            let e = before.exec & before.lanes;
            let want = [e as u32, (e >> 32) as u32];
            let got = [words[i + 1], words[i + 2]];
            if got != want {
                return Err(format!(
                    "address trace id {id}: exec words {} are not EXEC {}",
                    hexes(&got),
                    hexes(&want)
                ));
            }
        }
        headers.push(legacy);
        prev = (n > 0).then_some((id, n));
        i += 1 + n as usize;
    }
    Ok(headers)
}

/// VGPRs read by the instructions of a run.
pub(crate) fn vgprs_read<'a>(insts: impl Iterator<Item = &'a amdgpu_isa::Instruction>) -> Vec<u16> {
    let mut all = amdgpu_isa::RegSet::new();
    for i in insts {
        all.union_with(&i.reads());
    }
    (0..sqtt_interp::NUM_VGPRS as u16)
        .filter(|v| all.contains_vgpr(*v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::build::Operand;

    /// Two entries with the same bytes and landing but different changeable SGPRs: the stored
    /// outcome of the first (s5 dead there, no problem) must not answer the second (s5 live),
    /// and an entry whose outcome had a problem is executed again.
    #[test]
    fn stored_outcomes_are_keyed_by_every_input() {
        let t = Target::from_name("gfx942").expect("gfx942");
        let mov = build::s_mov_b32(t, Operand::Sgpr(5), Operand::Imm(7)).expect("s_mov_b32");
        let code = mov.bytes().to_vec();
        let (payload, names) = (BTreeMap::new(), BTreeMap::new());
        let env = Env {
            target: t,
            wave_size: 64,
            free: &[],
            scope_flag: None,
            layout: Layout::Legacy,
            payload: &payload,
            names: &names,
            runs: Default::default(),
        };
        let entry = |start: u64, changeable: u128| Entry {
            code: &code,
            start,
            landing: start,
            frame: true,
            deterministic: true,
            trials: 2,
            vgprs: &[],
            changeable,
            m0: None,
        };
        let problems =
            |x: &Exec| -> Vec<String> { x.problems.iter().map(|p| p.1.clone()).collect() };
        assert!(problems(&execute(&env, &entry(0x100, 1 << 5))).is_empty());
        assert_eq!(env.runs.borrow().len(), 1);
        let live = vec![
            "inserted run changes s5, which is live or awaiting an SMEM result there".to_string(),
        ];
        assert_eq!(problems(&execute(&env, &entry(0x200, 0))), live);
        // Not stored: the same entry elsewhere is executed and rejected again.
        assert_eq!(problems(&execute(&env, &entry(0x300, 0))), live);
        assert_eq!(env.runs.borrow().len(), 1);
        // The stored outcome answers an identical entry at another address.
        assert!(problems(&execute(&env, &entry(0x400, 1 << 5))).is_empty());
    }
}
