//! The shared facts every check reads ([`Program`]): both text sections, every function of the
//! original found in both code objects, decoded and aligned (the address map from original
//! instructions to their rewritten copies and the inserted runs in front of them), the
//! registers of every instruction, landing blocks and islands, and the facts of the funcmap
//! the flow checks read. Built once by the driver ([`crate::verify_parsed`]); no check module
//! imports another, only this one. Building reports the alignment, decode and padding
//! findings (an original instruction without its copy cannot be checked further).

mod align;
pub(crate) mod builder;
mod func;
mod funcmap_facts;
pub(crate) mod insn;
mod landing;
mod noreturn;
pub(crate) mod outside;
mod prepare;
pub(crate) mod regs;
pub(crate) mod scope_rows;
mod text;

use std::collections::{BTreeMap, HashMap, HashSet};

use amdgpu_isa::{RegSet, Special, Target};
use hsaco::CodeObject;
use rayon::prelude::*;

pub(crate) use align::same;
pub(crate) use builder::{builder_target, find_builders, Builder};
pub(crate) use func::{Func, NInst, OInst, Slot};
pub(crate) use funcmap_facts::{FuncmapInfo, Layout, ADDR_TRACE_NAMES};
use landing::{find_islands, find_landings};
pub(crate) use landing::{Island, LandingBlock};
pub(crate) use noreturn::{aborts, falls_off};
use prepare::{count_code_end, prepare, splits_marker, trim_padding};
pub(crate) use regs::{BuildRegsHasher, Regs};
pub(crate) use text::{counterpart, Text, KEPT_TEXT_SECTION};

use crate::{Check, Finding, FunctionKind, VerifyError};

/// The kernels of `o` that `n` and `p` have too, in `o`'s order: each original kernel with the
/// first rewritten kernel of its name and the index of the function at its entry in `p.funcs`
/// (kernels without either are left out: the function-set check reports them).
pub(crate) fn kernel_pairs<'o, 'n>(
    o: &'o CodeObject,
    n: &'n CodeObject,
    p: &Program,
) -> Vec<(&'o hsaco::Kernel, &'n hsaco::Kernel, usize)> {
    // The first rewritten kernel of each name (a linear search per kernel was quadratic).
    let mut by_name: HashMap<&str, &hsaco::Kernel> = HashMap::new();
    for k in &n.kernels {
        by_name.entry(k.name.as_str()).or_insert(k);
    }
    o.kernels
        .iter()
        .filter_map(|ok| Some((ok, *by_name.get(ok.name.as_str())?, p.func_at(ok.entry)?)))
        .collect()
}

/// Both texts and every function, aligned.
pub(crate) struct Program<'a> {
    pub isa: Target,
    pub otext: Text<'a>,
    pub ntext: Text<'a>,
    /// The rewritten object's `.text` when the rewriter kept it in place and put the
    /// instrumented functions in [`KEPT_TEXT_SECTION`] (`ntext`): byte-identical to `otext`
    /// (a finding otherwise). Functions whose rewritten entry is their original one run from
    /// it, unchanged.
    pub kept: Option<Text<'a>>,
    /// Functions kept in place whose original does not decode, as (start, end, name), ascending:
    /// not in `funcs` (nothing of them can be checked but that they did not change, which
    /// `kept` proves); a call into one is unresolved for liveness, and a reference to an address
    /// in one must stay that address.
    pub opaque: Vec<(u64, u64, String)>,
    /// Every function, ascending by original start address (bodies do not overlap).
    pub funcs: Vec<Func<'a>>,
    /// Allocated non-executable sections: (original address, original end, rewritten address).
    pub secmap: Vec<(u64, u64, u64)>,
    /// SGPRs no original instruction of the object reads or writes (the only SGPRs inserted code
    /// may write).
    pub free_sgprs: RegSet,
    /// Long-branch islands found in inserted code (a relaxed branch's, or a landing block's
    /// long jump), by start address.
    pub islands: BTreeMap<u64, Island>,
    /// Landing blocks found in inserted code, by start address.
    pub landings: BTreeMap<u64, LandingBlock>,
}

struct Seed {
    name: String,
    kind: FunctionKind,
    size: Option<u64>,
}

/// Addresses of same-named entries, ascending per name: the `n`-th occurrence of a name in
/// the original pairs with the `n`-th address here (static functions may share names).
fn by_name<'a>(names: impl Iterator<Item = (&'a str, u64)>) -> HashMap<&'a str, Vec<u64>> {
    let mut m: HashMap<&str, Vec<u64>> = HashMap::new();
    for (nm, a) in names {
        m.entry(nm).or_default().push(a);
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// The `n`-th address of `key` in a [`by_name`] map.
fn pair_by_name(m: &HashMap<&str, Vec<u64>>, key: &str, n: usize) -> Option<u64> {
    m.get(key).and_then(|v| v.get(n)).copied()
}

impl<'a> Program<'a> {
    /// Finds every function of `orig` in both objects, decodes and aligns it; alignment,
    /// decode and padding problems are pushed to `findings`. Errors: [`VerifyError`] when a
    /// text section is missing or an original instruction does not decode.
    pub fn build(
        orig: &'a CodeObject,
        new: &'a CodeObject,
        isa: Target,
        findings: &mut Vec<Finding>,
    ) -> Result<Program<'a>, VerifyError> {
        let otext = Text::of(orig, "original")?;
        let (ntext, kept) = Text::of_rewritten(new)?;
        if let Some(k) = kept {
            check_kept(&otext, &k, findings);
        }

        // Original functions: kernels through their descriptors, device functions through
        // STT_FUNC symbols; one entry per start address.
        let mut seeds: BTreeMap<u64, Seed> = BTreeMap::new();
        for k in &orig.kernels {
            if otext.contains(k.entry) {
                seeds.entry(k.entry).or_insert(Seed {
                    name: k.name.clone(),
                    kind: FunctionKind::Kernel,
                    size: k.code_size,
                });
            }
        }
        for f in &orig.functions {
            if otext.contains(f.address) {
                seeds.entry(f.address).or_insert(Seed {
                    name: f.name.clone(),
                    kind: FunctionKind::Function,
                    size: Some(f.size),
                });
            }
        }
        let starts: Vec<u64> = seeds.keys().copied().collect();

        // Rewritten entries by name, built once (a search per function was quadratic): the
        // lowest kernel-entry or function symbol, the kernels' descriptor entries and the
        // device functions.
        let mut sym_entry: HashMap<&str, u64> = HashMap::new();
        for s in new.symbols.iter().filter(|s| {
            (s.kind == hsaco::SymbolKind::KernelEntry || s.symbol.st_type == hsaco::elf::STT_FUNC)
                && s.symbol.shndx != hsaco::elf::SHN_UNDEF
        }) {
            let e = sym_entry.entry(s.symbol.name.as_str()).or_insert(u64::MAX);
            *e = (*e).min(s.symbol.value);
        }
        let new_kernels = by_name(new.kernels.iter().map(|k| (k.name.as_str(), k.entry)));
        let new_functions = by_name(new.functions.iter().map(|f| (f.name.as_str(), f.address)));
        // Occurrence number of each name (for duplicated local names).
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut funcs = Vec::new();
        let mut opaque = Vec::new();
        for (i, (&start, seed)) in seeds.iter().enumerate() {
            let occ = seen.entry(seed.name.as_str()).or_insert(0);
            let n = *occ;
            *occ += 1;
            let region_end = starts.get(i + 1).copied().unwrap_or(otext.end());
            let orig_end = match seed.size {
                Some(s) if s > 0 => start.saturating_add(s).min(region_end),
                _ => trim_padding(&otext, start, region_end, isa),
            };
            let new_start = match seed.kind {
                FunctionKind::Kernel => sym_entry
                    .get(seed.name.as_str())
                    .copied()
                    .or_else(|| pair_by_name(&new_kernels, &seed.name, n)),
                FunctionKind::Function => pair_by_name(&new_functions, &seed.name, n),
            };
            if new_start.is_none() {
                findings.push(Finding {
                    check: Check::Functions,
                    function: Some(seed.name.clone()),
                    original_address: Some(start),
                    new_address: None,
                    message: "function is missing from the rewritten code object".into(),
                });
            }
            // Kept in place: the function runs from the kept `.text`, unchanged.
            let in_place = kept.filter(|k| new_start == Some(start) && k.contains(start));
            if in_place.is_some()
                && amdgpu_isa::decode_all(otext.slice(start, orig_end), isa).is_err()
            {
                opaque.push((start, orig_end, seed.name.clone()));
                continue;
            }
            let mut f = Func::new(
                seed.name.clone(),
                seed.kind,
                (start, orig_end),
                new_start,
                otext,
                in_place.unwrap_or(ntext),
            );
            f.kept_in_place = in_place.is_some();
            funcs.push(f);
        }
        check_new_only(orig, new, findings);

        let mut new_starts: Vec<u64> = funcs.iter().filter_map(|f| f.new_start).collect();
        new_starts.sort_unstable();
        new_starts.dedup();
        for f in funcs.iter_mut().filter(|f| !f.kept_in_place) {
            if let Some(s) = f.new_start {
                f.new_region_end = new_starts
                    .get(new_starts.partition_point(|&x| x <= s))
                    .copied()
                    .unwrap_or(ntext.end())
                    .min(ntext.end());
            }
        }

        // Kept in place: its copy is its own body; the bytes after it are the kept `.text`'s,
        // which `check_kept` proves unchanged (a gap there need not be padding).
        for f in funcs.iter_mut().filter(|f| f.kept_in_place) {
            f.new_region_end = f.orig_end;
        }
        // Functions are decoded, their registers decoded once for every later check, and aligned
        // in one parallel pass, so only the functions in flight hold their decoded bodies;
        // findings keep the function order, and the first function that does not decode is the
        // error.
        let ostarts: Vec<u64> = funcs.iter().map(|f| f.orig_start).collect();
        let aligned: Vec<Result<Vec<Finding>, VerifyError>> = funcs
            .par_iter_mut()
            .enumerate()
            .map(|(fi, f)| prepare(f, fi, &ostarts, &otext, isa, true))
            .collect();
        let mut aligned: Vec<Vec<Finding>> = aligned.into_iter().collect::<Result<_, _>>()?;
        // A function whose last instruction calls a function that never returns does not fall
        // off its end ([`crate::program::noreturn`]): prepared again as an ordinary function, and only
        // the findings of that second alignment count.
        for fi in crate::program::noreturn::ending_in_noreturn_calls(&funcs) {
            let f = &mut funcs[fi];
            let mut fresh = Func::new(
                f.name.clone(),
                f.kind,
                (f.orig_start, f.orig_end),
                f.new_start,
                otext,
                f.ntext,
            );
            fresh.new_region_end = f.new_region_end;
            fresh.kept_in_place = f.kept_in_place;
            *f = fresh;
            aligned[fi] = prepare(f, fi, &ostarts, &otext, isa, false)?;
        }
        findings.extend(aligned.into_iter().flatten());
        let used = funcs.iter().fold(RegSet::new(), |mut a, f| {
            a.union_with(&f.orig_used);
            a
        });
        let mut free_sgprs = RegSet::new();
        for r in 0..sqtt_interp::NUM_SGPRS as u16 {
            if !used.contains_sgpr(r) {
                free_sgprs.add_sgpr(r);
            }
        }
        let secmap = orig
            .elf
            .sections
            .iter()
            .filter(|s| s.is_alloc() && !s.is_exec())
            .filter_map(|s| {
                counterpart(new, s).map(|n| (s.addr, s.addr.saturating_add(s.size), n.addr))
            })
            .collect();
        let mut islands = find_islands(&funcs);
        let (landings, tails) = find_landings(&funcs);
        islands.extend(tails);
        let program = Program {
            isa,
            otext,
            ntext,
            kept,
            opaque,
            funcs,
            secmap,
            free_sgprs,
            islands,
            landings,
        };
        // Kept in place, the original tail padding stays in the kept `.text`.
        if program.kept.is_none() {
            program.check_tail(findings);
        }
        Ok(program)
    }

    /// Landing addresses allowed for a jump to original address `target`: every instruction start
    /// of the inserted run in front of the original instruction, and the instruction itself.
    pub fn landing(&self, target: u64) -> Option<(usize, usize, Vec<u64>)> {
        let (fi, k, lands) = self.landings(target, None)?;
        Some((fi, k, lands.collect()))
    }

    /// [`Program::landing`] with the addresses as an iterator (no list per question).
    /// `near`: index of a function the target most likely lies in (the jump's own), looked at
    /// before the search over every function.
    pub fn landings(
        &self,
        target: u64,
        near: Option<usize>,
    ) -> Option<(usize, usize, impl Iterator<Item = u64> + Clone + '_)> {
        let (fi, k) = self.original_at(target, near)?;
        let f = &self.funcs[fi];
        let copy = f.new_address(&f.orig[k])?;
        let run = f.inserted.get(f.run(k)).unwrap_or_default();
        Some((
            fi,
            k,
            run.iter()
                .enumerate()
                .filter(move |&(p, _)| !splits_marker(run, p))
                .map(|(_, n)| n.addr)
                .chain(std::iter::once(copy)),
        ))
    }

    /// Rewritten address of a data address `a` outside `.text` (moves with its section; addresses in
    /// no allocated section stay put).
    pub fn map_data(&self, a: u64) -> u64 {
        self.secmap
            .iter()
            .find(|(s, e, _)| a >= *s && a <= *e)
            .map_or(a, |(s, _, n)| n.wrapping_add(a - s))
    }

    /// The function kept in place that does not decode ([`Program::opaque`]) holding original
    /// address `a`: its name.
    pub fn opaque_at(&self, a: u64) -> Option<&str> {
        let i = self.opaque.partition_point(|o| o.0 <= a).checked_sub(1)?;
        let (s, e, name) = &self.opaque[i];
        (*s <= a && a < *e).then_some(name.as_str())
    }

    /// Original function index whose entry is `addr` (binary search: `funcs` is sorted by start).
    pub fn func_at(&self, addr: u64) -> Option<usize> {
        self.funcs
            .binary_search_by_key(&addr, |f| f.orig_start)
            .ok()
    }

    /// The original instruction starting at address `a`: (function index, instruction index).
    /// Binary searches: functions by start, then the function's instructions (in address order).
    /// `near`: a function to try first; when `a` lies in its body it is the function the search
    /// would find (the last one starting at or before `a`: bodies do not overlap and the next
    /// function starts at or after its end).
    pub fn original_at(&self, a: u64, near: Option<usize>) -> Option<(usize, usize)> {
        let inside = near.filter(|&g| {
            self.funcs
                .get(g)
                .is_some_and(|f| f.orig_start <= a && a < f.orig_end)
        });
        let fi = match inside {
            Some(g) => g,
            None => self
                .funcs
                .partition_point(|f| f.orig_start <= a)
                .checked_sub(1)?,
        };
        let k = self.funcs[fi]
            .orig
            .binary_search_by_key(&a, |o| o.addr)
            .ok()?;
        Some((fi, k))
    }

    /// The tail `s_code_end` padding after the last function is copied (same count).
    fn check_tail(&self, findings: &mut Vec<Finding>) {
        let Some(last_o) = self.funcs.iter().max_by_key(|f| f.orig_start) else {
            return;
        };
        let otail = count_code_end(
            self.otext.slice(last_o.orig_end, self.otext.end()),
            self.isa,
        );
        let Some(last_n) = self
            .funcs
            .iter()
            .filter(|f| f.new_start.is_some())
            .max_by_key(|f| f.new_start)
        else {
            return;
        };
        let ntail = last_n
            .padding
            .iter()
            .filter(|p| p.inst.special() == Special::CodeEnd)
            .count();
        if otail != ntail {
            findings.push(last_n.finding(
                Check::Padding,
                Some(last_o.orig_end),
                last_n.new_body_end(),
                format!("tail padding has {ntail} s_code_end words, the original has {otail}"),
            ));
        }
        for (fi, f) in self.funcs.iter().enumerate() {
            if f.new_start == last_n.new_start {
                continue;
            }
            // Real libraries (rocPRIM in onnxruntime) have `s_code_end` between functions: the
            // original's own gap after `f` may keep it. `funcs` ascend by distinct starts.
            let next = self
                .funcs
                .get(fi + 1)
                .map_or(self.otext.end(), |g| g.orig_start);
            if count_code_end(self.otext.slice(f.orig_end, next), self.isa) > 0 {
                continue;
            }
            if let Some(p) = f
                .padding
                .iter()
                .find(|p| p.inst.special() == Special::CodeEnd)
            {
                findings.push(f.finding(
                    Check::Padding,
                    None,
                    Some(p.addr),
                    "s_code_end inside the text (only allowed as tail padding)".into(),
                ));
            }
        }
    }
}

/// The rewritten object's kept `.text` must be the original `.text`, at the same address and
/// byte for byte (what runs from it is the original code).
fn check_kept(otext: &Text<'_>, kept: &Text<'_>, findings: &mut Vec<Finding>) {
    let differs = if kept.addr != otext.addr || kept.bytes.len() != otext.bytes.len() {
        Some(format!(
            "the kept .text is at {:#x} with {:#x} bytes, the original at {:#x} with {:#x}",
            kept.addr,
            kept.bytes.len(),
            otext.addr,
            otext.bytes.len()
        ))
    } else {
        (0..kept.bytes.len())
            .find(|&k| kept.bytes[k] != otext.bytes[k])
            .map(|k| format!("the kept .text differs from the original at byte {k:#x}"))
    };
    if let Some(message) = differs {
        findings.push(Finding {
            check: Check::Sections,
            function: None,
            original_address: Some(otext.addr),
            new_address: Some(kept.addr),
            message,
        });
    }
}

fn check_new_only(orig: &CodeObject, new: &CodeObject, findings: &mut Vec<Finding>) {
    let kernels: HashSet<&str> = orig.kernels.iter().map(|k| k.name.as_str()).collect();
    let functions: HashSet<&str> = orig.functions.iter().map(|f| f.name.as_str()).collect();
    for k in &new.kernels {
        if !kernels.contains(k.name.as_str()) {
            findings.push(Finding {
                check: Check::Functions,
                function: Some(k.name.clone()),
                original_address: None,
                new_address: Some(k.entry),
                message: "kernel exists only in the rewritten code object".into(),
            });
        }
    }
    for f in &new.functions {
        if !functions.contains(f.name.as_str()) {
            findings.push(Finding {
                check: Check::Functions,
                function: Some(f.name.clone()),
                original_address: None,
                new_address: Some(f.address),
                message: "device function exists only in the rewritten code object".into(),
            });
        }
    }
}
