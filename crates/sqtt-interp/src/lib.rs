//! `sqtt-interp`: executes small AMDGPU instrumentation snippets (SQTT markers, scope checks,
//! per-lane address loops) on a model wave and returns the SQTT shaderdata stream, so tests can
//! prove that what the rewriter inserts produces exactly the framing of the spec ("Marker
//! Encoding", "Address Tracing" / "Framing protocol", "Scope filtering", "GFX12 Shader Clock
//! Packing"). There is no GPU here: this is a model, not an emulator.
//!
//! # API
//! - [`Wave`]: the architectural state a snippet can touch (SGPRs, VGPRs, EXEC, VCC, SCC, M0,
//!   hardware registers, shader clock). [`Wave::new`] validates the wave size.
//! - [`run`]: executes from a start PC until the PC leaves the code range, `s_endpgm`, or an error.
//! - [`Code`] / [`run_code`]: the same on code decoded once for several runs.
//! - [`run_code_jumps`]: [`run_code`] that also records every control transfer taken ([`Jump`]:
//!   branches taken, `s_setpc_b64`, `s_swappc_b64`), so tests can compare the paths of an
//!   original and a rewritten stretch of code.
//! - [`shaderdata_of`]: convenience wrapper returning only the shaderdata dwords.
//! - [`InterpError`]: typed failures carrying the PC and the byte offset into the code.
//!
//! # Supported subset
//! Instructions are decoded by `amdgpu-isa` (tables generated from LLVM 22), so every family's
//! encoding is handled; the semantics table is [`semantics`] (see its docs for the list and the
//! ISA-manual sections). Anything else is [`InterpError::Unsupported`], naming the mnemonic.
//!
//! # Model assumptions (documented, not hardware-verified)
//! - wave32: `exec_hi` reads as 0 and writes to it are ignored (the spec's framing says the
//!   `exec_hi` token is 0 on wave32); `s_cbranch_execz`/`vccz` and `src_execz`/`src_vccz` look at
//!   the low 32 bits only (RDNA ISA manuals, "Wave32 and wave64").
//! - `shader_cycles` is a sample that does not advance while the snippet runs.
//! - Hardware hazards (wait states, `s_nop` counts, `s_wait_alu`) are not modelled: those
//!   instructions are no-ops.
use std::collections::HashMap;

use amdgpu_isa::{decode, DecodeError, Family, Target};

pub mod semantics;

/// Number of SGPRs in [`Wave::sgpr`] (`s0`..`s105`, the gfx10+ addressable maximum; gfx9 has
/// `s0`..`s101` and encodings 102..=105 name FLAT_SCRATCH/XNACK_MASK there).
pub const NUM_SGPRS: usize = 106;

/// Number of VGPRs [`Wave::new`] allocates (`v0`..`v255`).
pub const NUM_VGPRS: usize = 256;

/// Default instruction budget of [`shaderdata_of`] (instructions).
pub const DEFAULT_MAX_STEPS: usize = 1_000_000;

/// The state of one model wave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wave {
    /// Processor whose encodings and register numbering are used.
    pub target: Target,
    /// Lanes per wave: 32 or 64 (gfx9 is wave64 only).
    pub wave_size: u32,
    /// Scalar registers `s0`..`s105` (32-bit each).
    pub sgpr: [u32; NUM_SGPRS],
    /// Vector registers: `vgpr[r][lane]` is lane `lane` of `v<r>`; lanes >= `wave_size` are unused.
    pub vgpr: Vec<[u32; 64]>,
    /// EXEC mask (bit n = lane n); only the low 32 bits matter on wave32.
    pub exec: u64,
    /// VCC (64-bit; on wave32 `vcc_hi` is still a readable/writable register).
    pub vcc: u64,
    /// Scalar condition code.
    pub scc: bool,
    /// M0 (the value `s_ttracedata` sends).
    pub m0: u32,
    /// Hardware registers read by `s_getreg_b32`, keyed by hwreg id (e.g. 4 = `HW_REG_HW_ID` on
    /// gfx9, 23/24 = `HW_REG_HW_ID1`/`HW_ID2` on gfx10+). Shader-clock ids are served from
    /// [`Wave::shader_cycles`] instead (see [`semantics`]). Reading an absent id is an error.
    pub hwreg: HashMap<u8, u32>,
    /// Shader clock sample (cycles) returned by `s_get_shader_cycles_u64` (gfx1250) and
    /// `s_getreg_b32 hwreg(HW_REG_SHADER_CYCLES[_LO|_HI])`.
    pub shader_cycles: u64,
}

impl Wave {
    /// A zeroed wave with all `wave_size` lanes active in EXEC and [`NUM_VGPRS`] VGPRs.
    /// Errors: [`InterpError::BadWaveSize`] unless 32 or 64, and 32 on gfx9 (wave64 only).
    pub fn new(target: Target, wave_size: u32) -> Result<Wave, InterpError> {
        check_wave_size(target, wave_size)?;
        let exec = if wave_size == 64 {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        Ok(Wave {
            target,
            wave_size,
            sgpr: [0; NUM_SGPRS],
            vgpr: vec![[0; 64]; NUM_VGPRS],
            exec,
            vcc: 0,
            scc: false,
            m0: 0,
            hwreg: HashMap::new(),
            shader_cycles: 0,
        })
    }

    /// Mask of the lanes that exist in this wave (low `wave_size` bits).
    pub fn lane_mask(&self) -> u64 {
        if self.wave_size >= 64 {
            u64::MAX
        } else {
            (1u64 << self.wave_size) - 1
        }
    }
}

/// Wave sizes: gfx9 is wave64 only; gfx10+ run wave32 or wave64 (AMDGPUUsage "Processors").
fn check_wave_size(target: Target, wave_size: u32) -> Result<(), InterpError> {
    let ok = match target.family() {
        Family::Gfx9 => wave_size == 64,
        _ => wave_size == 32 || wave_size == 64,
    };
    if ok {
        Ok(())
    } else {
        Err(InterpError::BadWaveSize {
            wave_size,
            target: target.name(),
        })
    }
}

/// Result of [`run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The SQTT shaderdata records in issue order: `s_ttracedata` sends M0, `s_ttracedata_imm`
    /// sends its 8-bit immediate (32-bit dwords).
    pub shaderdata: Vec<u32>,
    /// Instructions executed (each counts once, including the final `s_endpgm`).
    pub executed: usize,
    /// Where execution left: the first address outside the code (fall-through or branch
    /// target), or the address of the `s_endpgm` that ended it (bytes, same base as `start_pc`).
    pub exit_pc: u64,
}

/// A control transfer taken during a run ([`run_code_jumps`]): the instruction at `from` sent the
/// PC to `to` (a branch taken, `s_setpc_b64`, `s_swappc_b64`; not a fall-through).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jump {
    /// Address of the instruction that jumped.
    pub from: u64,
    /// Where it sent the PC.
    pub to: u64,
    /// Its mnemonic (LLVM spelling).
    pub mnemonic: &'static str,
}

/// Why a snippet could not be executed. `pc` is the instruction address; `offset` its byte
/// offset into `code`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("wave size {wave_size} is not valid for {target} (32 or 64; gfx9 is wave64 only)")]
    BadWaveSize {
        wave_size: u32,
        target: &'static str,
    },
    #[error("pc {pc:#x} (code offset {offset:#x}): cannot decode: {source}")]
    Decode {
        pc: u64,
        offset: usize,
        source: DecodeError,
    },
    #[error("pc {pc:#x} (code offset {offset:#x}): {mnemonic} is outside the supported subset")]
    Unsupported {
        pc: u64,
        offset: usize,
        mnemonic: &'static str,
    },
    #[error("pc {pc:#x} (code offset {offset:#x}): {mnemonic}: operand field {field} value {value} is not supported ({why})")]
    UnsupportedOperand {
        pc: u64,
        offset: usize,
        mnemonic: &'static str,
        field: &'static str,
        value: u32,
        why: &'static str,
    },
    #[error(
        "pc {pc:#x} (code offset {offset:#x}): {mnemonic} has no field {field} in this encoding"
    )]
    MissingField {
        pc: u64,
        offset: usize,
        mnemonic: &'static str,
        field: &'static str,
    },
    #[error("pc {pc:#x} (code offset {offset:#x}): s_getreg_b32 reads hwreg {id}, which the wave does not define")]
    UninitialisedHwreg { pc: u64, offset: usize, id: u8 },
    #[error(
        "pc {pc:#x} (code offset {offset:#x}): v{vgpr} is beyond the wave's {available} VGPRs"
    )]
    VgprOutOfRange {
        pc: u64,
        offset: usize,
        vgpr: u32,
        available: usize,
    },
    #[error("step limit of {max_steps} instructions reached at pc {pc:#x}")]
    StepLimit { max_steps: usize, pc: u64 },
}

/// Code to execute, placed at an address, with each instruction decoded at most once: a
/// [`Code`] run several times (trials on different register states, [`run_code`]) decodes every
/// instruction it reaches once in all, not once per step. Decoding is lazy, in execution order,
/// so errors are the same as [`run`]'s.
pub struct Code<'a> {
    bytes: &'a [u8],
    start_pc: u64,
    /// Target the cache was filled for (the running wave's).
    target: Option<Target>,
    /// By dword offset into `bytes`: the index in `prepared` of the instruction starting
    /// there, once decoded (`u32::MAX`: not yet).
    slots: Vec<u32>,
    /// The instructions decoded so far, in execution order.
    prepared: Vec<semantics::Prepared>,
    /// The instruction at the last offset executed that is not a dword's (not kept past it).
    unaligned: Option<semantics::Prepared>,
}

impl<'a> Code<'a> {
    /// `bytes` placed at address `start_pc` (bytes).
    pub fn new(bytes: &'a [u8], start_pc: u64) -> Code<'a> {
        Code {
            bytes,
            start_pc,
            target: None,
            slots: Vec::new(),
            prepared: Vec::new(),
            unaligned: None,
        }
    }

    /// The instructions decoded so far (every instruction a run of this code executed), in
    /// address order.
    pub fn decoded(&self) -> impl Iterator<Item = &amdgpu_isa::Instruction> + '_ {
        self.slots
            .iter()
            .filter(|&&k| k != u32::MAX)
            .map(|&k| &self.prepared[k as usize].inst)
    }

    /// The instruction at byte `offset`, decoded for `target` and prepared for execution
    /// (cached per dword offset).
    fn at(
        &mut self,
        target: Target,
        offset: usize,
        pc: u64,
    ) -> Result<&semantics::Prepared, InterpError> {
        if self.target != Some(target) {
            self.target = Some(target);
            self.slots = vec![u32::MAX; self.bytes.len().div_ceil(4)];
            self.prepared.clear();
        }
        let prepare = |bytes: &[u8]| {
            let rest = bytes.get(offset..).unwrap_or_default();
            decode(rest, target)
                .map(semantics::Prepared::new)
                .map_err(|source| InterpError::Decode { pc, offset, source })
        };
        if !offset.is_multiple_of(4) {
            // Not cached: decoded again at every step.
            return Ok(self.unaligned.insert(prepare(self.bytes)?));
        }
        let slot = offset / 4;
        if self.slots[slot] == u32::MAX {
            let p = prepare(self.bytes)?;
            self.slots[slot] = self.prepared.len() as u32;
            self.prepared.push(p);
        }
        Ok(&self.prepared[self.slots[slot] as usize])
    }
}

/// Executes `code` (placed at address `start_pc`) on `wave`, starting at `start_pc`.
///
/// Stops with `Ok` when the PC leaves `[start_pc, start_pc + code.len())` (falls off the end or
/// branches out; [`Run::exit_pc`] is that address) or at `s_endpgm`. Errors: undecodable bytes,
/// an instruction or operand outside the subset of [`semantics`], an absent hwreg, a VGPR beyond
/// `wave.vgpr`, or more than `max_steps` instructions ([`InterpError::StepLimit`]).
/// `wave` keeps the state reached, also on error.
pub fn run(
    wave: &mut Wave,
    code: &[u8],
    start_pc: u64,
    max_steps: usize,
) -> Result<Run, InterpError> {
    run_code(wave, &mut Code::new(code, start_pc), max_steps)
}

/// [`run`] on a [`Code`], which keeps the instructions decoded for the next run of the same
/// code.
pub fn run_code(wave: &mut Wave, code: &mut Code, max_steps: usize) -> Result<Run, InterpError> {
    run_inner(wave, code, max_steps, None)
}

/// [`run_code`] that appends every control transfer taken to `jumps`, in execution order (also
/// those taken before an error).
pub fn run_code_jumps(
    wave: &mut Wave,
    code: &mut Code,
    max_steps: usize,
    jumps: &mut Vec<Jump>,
) -> Result<Run, InterpError> {
    run_inner(wave, code, max_steps, Some(jumps))
}

fn run_inner(
    wave: &mut Wave,
    code: &mut Code,
    max_steps: usize,
    mut jumps: Option<&mut Vec<Jump>>,
) -> Result<Run, InterpError> {
    // Validate the wave size even when the caller built the struct by hand.
    check_wave_size(wave.target, wave.wave_size)?;
    let start_pc = code.start_pc;
    let end = start_pc.saturating_add(code.bytes.len() as u64);
    let mut out = Run {
        shaderdata: Vec::new(),
        executed: 0,
        exit_pc: start_pc,
    };
    let mut pc = start_pc;
    while pc >= start_pc && pc < end {
        if out.executed >= max_steps {
            return Err(InterpError::StepLimit { max_steps, pc });
        }
        let offset = (pc - start_pc) as usize;
        let p = code.at(wave.target, offset, pc)?;
        let inst = &p.inst;
        out.executed += 1;
        let at = semantics::At { pc, offset };
        match semantics::step(wave, p, at, &mut out.shaderdata)? {
            semantics::Next::Fallthrough => pc = pc.wrapping_add(inst.len() as u64),
            semantics::Next::Jump(t) => {
                if let Some(j) = jumps.as_deref_mut() {
                    j.push(Jump {
                        from: pc,
                        to: t,
                        mnemonic: inst.mnemonic(),
                    });
                }
                pc = t
            }
            semantics::Next::End => {
                out.exit_pc = pc;
                return Ok(out);
            }
        }
    }
    out.exit_pc = pc;
    Ok(out)
}

/// Runs `code` at address 0 on a fresh [`Wave::new`]`(target, wave_size)` after `setup` has
/// adjusted it, with [`DEFAULT_MAX_STEPS`], and returns the shaderdata dwords.
pub fn shaderdata_of(
    target: Target,
    wave_size: u32,
    code: &[u8],
    setup: impl FnOnce(&mut Wave),
) -> Result<Vec<u32>, InterpError> {
    let mut w = Wave::new(target, wave_size)?;
    setup(&mut w);
    Ok(run(&mut w, code, 0, DEFAULT_MAX_STEPS)?.shaderdata)
}
