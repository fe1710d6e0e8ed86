//! Inlined functions as scopes (issue 16) on the `inlined` fixtures (clang-22 `-O3 -g` and
//! `-O3 -gline-tables-only`, gfx942 and gfx1100): every output passes the verifier, and a walk of
//! the rewritten code's control flow (every path, as a set of (instruction, open scopes) states)
//! shows the marker stream a wave produces: enters and exits nest as llvm-dwarfdump-22's tree of
//! `DW_TAG_inlined_subroutine` says (each scope opens inside one of its DWARF ancestors or at top
//! level), no exit finds an empty stack, and every `s_endpgm` is reached with nothing open.
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Command;

use amdgpu_isa::{build, Flow, Special};
use sqtt_funcmap::Row;
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use sqtt_verify::Check;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// (DIE offset, parent DIE offset, origin name) of every inlined subroutine, from
/// llvm-dwarfdump-22 (indentation gives the nesting).
fn dwarfdump_tree(bytes: &[u8]) -> Vec<(u64, Option<u64>, String)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("in.co");
    std::fs::write(&p, bytes).expect("write");
    let out = Command::new("/usr/lib/llvm-22/bin/llvm-dwarfdump")
        .arg("--debug-info")
        .arg(&p)
        .output()
        .expect("llvm-dwarfdump-22");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut res = Vec::new();
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Inlined,
        Subprogram,
        Other,
    }
    let mut stack: Vec<(usize, u64, Kind)> = Vec::new();
    let mut pending: Option<(u64, Option<u64>)> = None;
    for line in text.lines() {
        if let Some((off, rest)) = line.split_once(": ") {
            if let Ok(o) = u64::from_str_radix(off.trim_start_matches("0x"), 16) {
                let col = rest.len() - rest.trim_start().len();
                let tag = rest.trim();
                if !tag.starts_with("DW_TAG_") && tag != "NULL" {
                    continue;
                }
                while stack.last().is_some_and(|(c, _, _)| *c >= col) {
                    stack.pop();
                }
                if tag == "NULL" {
                    continue;
                }
                let kind = match tag {
                    "DW_TAG_inlined_subroutine" => Kind::Inlined,
                    "DW_TAG_subprogram" => Kind::Subprogram,
                    _ => Kind::Other,
                };
                if kind == Kind::Inlined {
                    // Nearest enclosing inlined subroutine, through lexical blocks, up to
                    // the subprogram.
                    let parent = stack
                        .iter()
                        .rev()
                        .find(|(_, _, k)| *k != Kind::Other)
                        .filter(|(_, _, k)| *k == Kind::Inlined)
                        .map(|(_, o, _)| *o);
                    pending = Some((o, parent));
                }
                stack.push((col, o, kind));
                continue;
            }
        }
        if line.trim_start().starts_with("DW_AT_abstract_origin") {
            if let Some((o, parent)) = pending.take() {
                let name = line.split('"').nth(1).unwrap_or_default().to_string();
                res.push((o, parent, name));
            }
        }
    }
    res
}

/// Marker words of the rewritten instruction at `i` (the `s_ttracedata` value comes from the
/// `s_mov_b32 m0, K` two instructions before).
fn marker(insts: &[sqtt_verify::LaidOut], i: usize) -> Option<u32> {
    match insts[i].inst.special() {
        Special::TtraceDataImm(v) => Some(u32::from(v)),
        Special::TtraceData => {
            let text = insts[i.checked_sub(2)?].inst.to_string();
            let k = text.rsplit(", ").next()?.trim();
            match k.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok(),
                None => k.parse().ok(),
            }
        }
        _ => None,
    }
}

struct Walk {
    /// Open scopes at each original instruction (by index): every path agrees.
    at_orig: HashMap<usize, Vec<String>>,
    /// Every (parent scope name or None, child scope name) seen at an enter.
    nestings: BTreeSet<(Option<String>, String)>,
    /// Enters per scope name over all states (a loop body counts once).
    enters: BTreeMap<String, usize>,
    endpgm_reached: usize,
    problems: Vec<String>,
}

/// Explores every path of `insts` (one kernel) from its entry as (instruction, open scopes)
/// states.
fn walk(insts: &[sqtt_verify::LaidOut], names: &HashMap<u32, String>) -> Walk {
    let at: HashMap<u64, usize> = insts.iter().enumerate().map(|(i, x)| (x.addr, i)).collect();
    let mut w = Walk {
        at_orig: HashMap::new(),
        nestings: BTreeSet::new(),
        enters: BTreeMap::new(),
        endpgm_reached: 0,
        problems: Vec::new(),
    };
    let mut seen: BTreeSet<(usize, Vec<String>)> = BTreeSet::new();
    let mut work = VecDeque::from([(0usize, Vec::<String>::new())]);
    while let Some((i, mut stack)) = work.pop_front() {
        if !seen.insert((i, stack.clone())) || seen.len() > 200_000 {
            continue;
        }
        let Some(x) = insts.get(i) else { continue };
        if !x.inserted {
            let first = w.at_orig.entry(i).or_insert_with(|| stack.clone());
            if *first != stack {
                w.problems.push(format!(
                    "paths meet at {:#x} with {first:?} and {stack:?} open",
                    x.addr
                ));
            }
        }
        if let Some(v) = marker(insts, i) {
            if v & 1 == 1 && stack.pop().is_none() {
                w.problems
                    .push(format!("exit with nothing open at {:#x}", x.addr));
            }
            if v & 2 == 2 {
                let name = names.get(&(v >> 2)).cloned().unwrap_or_default();
                w.nestings.insert((stack.last().cloned(), name.clone()));
                *w.enters.entry(name.clone()).or_default() += 1;
                stack.push(name);
            }
        }
        let next = i + 1;
        let target = x
            .inst
            .branch_target(x.addr)
            .and_then(|t| at.get(&t).copied());
        match x.inst.flow() {
            Flow::Fallthrough | Flow::Call => work.push_back((next, stack)),
            Flow::Branch { conditional } => {
                if conditional {
                    work.push_back((next, stack.clone()));
                }
                match target {
                    Some(t) => work.push_back((t, stack)),
                    None => w.problems.push(format!("branch out at {:#x}", x.addr)),
                }
            }
            Flow::EndProgram => {
                w.endpgm_reached += 1;
                if !stack.is_empty() {
                    w.problems
                        .push(format!("s_endpgm at {:#x} with {stack:?} open", x.addr));
                }
            }
            _ => {}
        }
    }
    w
}

#[test]
fn inlined_scopes_nest_as_dwarf_says_on_every_path() {
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        ..Options::default()
    };
    for t in ["gfx942", "gfx1100"] {
        for v in ["O3-g", "O3-gline"] {
            let name = format!("{t}__inlined__{v}.co");
            let orig = fixture(&name);
            let out = rewrite(&orig, &opts).expect("rewrite");
            assert_eq!(out.report.status, Status::Instrumented, "{name}");
            let inl = &out.report.inlined;
            assert!(inl.unavailable.is_none(), "{name}");
            // fx.h geometry (3), reduce_rows/hash_row/mix/classify, hash_row twice, mix in loops.
            assert!(inl.found >= 15, "{name}: {inl:?}");
            assert_eq!(
                inl.found,
                inl.marked + inl.below_threshold + inl.left_out.len()
            );
            assert!(inl.marked * 4 >= inl.found * 3, "{name}: {inl:?}");
            // Every edge that needs its own markers got a landing block.
            assert!(inl.left_out.is_empty(), "{name}: {:?}", inl.left_out);
            assert!(inl.landing_blocks > 0, "{name}: {inl:?}");
            let new = out.bytes.expect("bytes");
            let r = sqtt_verify::verify(&orig, &new).expect("verify");
            assert!(r.is_clean(), "{name}: {:#?}", r.findings);

            // Oracle: the DWARF tree as llvm-dwarfdump-22 prints it.
            let tree = dwarfdump_tree(&orig);
            let by_off: HashMap<u64, (Option<u64>, String)> =
                tree.iter().map(|(o, p, n)| (*o, (*p, n.clone()))).collect();
            let mut allowed: BTreeSet<(Option<String>, String)> = BTreeSet::new();
            for (_, parent, n) in &tree {
                allowed.insert((None, n.clone()));
                let mut p = *parent;
                while let Some(o) = p {
                    let (pp, pn) = &by_off[&o];
                    allowed.insert((Some(pn.clone()), n.clone()));
                    p = *pp;
                }
            }
            let co = hsaco::CodeObject::parse(&new).expect("parse");
            let fm = sqtt_funcmap::parse(co.funcmap().expect("funcmap"));
            let names: HashMap<u32, String> = fm
                .rows
                .iter()
                .filter_map(|r| match r {
                    Row::Function { id, name, .. } => Some((*id, name.clone())),
                    _ => None,
                })
                .collect();
            let mut nested = 0;
            for (kernel, insts) in sqtt_verify::layout(&orig, &new).expect("layout") {
                let w = walk(&insts, &names);
                assert!(w.problems.is_empty(), "{name} {kernel}: {:?}", w.problems);
                assert!(w.endpgm_reached > 0, "{name} {kernel}");
                for pair in &w.nestings {
                    assert!(
                        allowed.contains(pair),
                        "{name} {kernel}: {pair:?} not in DWARF"
                    );
                    nested += usize::from(pair.0.is_some());
                }
                if kernel == "k_straight" {
                    // mix(mix(g, k), k + 1): two instances of mix on the one path.
                    let mix = w
                        .enters
                        .iter()
                        .filter(|(n, _)| n.contains("mix"))
                        .map(|(_, c)| *c)
                        .sum::<usize>();
                    assert!(mix >= 2, "{name}: {:?}", w.enters);
                }
            }
            assert!(nested > 0, "{name}: no nested scope entered");
        }
    }
}

/// With kernel scopes and scope filtering too, the inlined exits in front of an `s_endpgm` split
/// into a fall-through-only part and a part branches land on, each behind its scope guard; the
/// verifier must count the markers of such a mid-run branch entry (it did not before: the corpus
/// object below was rejected with "scope depth 1 and 0 meet here").
#[test]
fn inlined_scopes_with_kernel_scopes_and_scope_filtering_verify() {
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        kernel_scopes: true,
        barriers: true,
        scope: Some(Default::default()),
        ..Options::default()
    };
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/corpus/compiled/gfx1100__hip-mini__O3-g.co");
    let mut inputs: Vec<(String, Vec<u8>)> = ["gfx942", "gfx1100"]
        .iter()
        .flat_map(|t| ["O3-g", "O3-gline"].map(|v| format!("{t}__inlined__{v}.co")))
        .map(|n| (n.clone(), fixture(&n)))
        .collect();
    inputs.push((
        "corpus gfx1100__hip-mini__O3-g.co".into(),
        std::fs::read(&corpus).expect("corpus object"),
    ));
    for (name, orig) in inputs {
        let out = rewrite(&orig, &opts).expect("rewrite");
        assert_eq!(out.report.status, Status::Instrumented, "{name}");
        assert!(out.report.inlined.marked > 0, "{name}");
        let r = sqtt_verify::verify(&orig, &out.bytes.expect("bytes")).expect("verify");
        assert!(r.is_clean(), "{name}: {:#?}", r.findings);
    }
}

/// Landing blocks with shader-clock packing on gfx1250 (fresh-tester finding, session 6): a
/// block's clock marker may use SGPRs dead at the branch target though live at the fall-through
/// instruction the block sits in front of (here the kernarg pointer s[0:1] read by the
/// `s_load_b256` after a `s_cbranch_execz`); the verifier judged it by the fall-through.
#[test]
fn landing_blocks_with_clock_packing_verify() {
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        shader_clock_bits: 6,
        ..Options::default()
    };
    for name in ["gfx1250__memory__O3-g.co", "gfx1250__calls__O3-g.co"] {
        let orig = fixture(name);
        let out = rewrite(&orig, &opts).expect("rewrite");
        assert_eq!(out.report.status, Status::Instrumented, "{name}");
        assert!(out.report.inlined.landing_blocks > 0, "{name}");
        let r = sqtt_verify::verify(&orig, &out.bytes.expect("bytes")).expect("verify");
        assert!(r.is_clean(), "{name}: {:#?}", r.findings);
    }
}

/// Landing blocks of one rewritten kernel (the verifier's alignment tells inserted from original
/// instructions): an original conditional SOPP branch retargeted to inserted code right after
/// it and an inserted `s_branch` over the block, up to the block's `s_branch`. Returns
/// (index of the branch, index of the block's first instruction, index of its jump).
fn landing_blocks(insts: &[sqtt_verify::LaidOut]) -> Vec<(usize, usize, usize)> {
    let at: HashMap<u64, usize> = insts.iter().enumerate().map(|(i, x)| (x.addr, i)).collect();
    let mut out = Vec::new();
    for (i, x) in insts.iter().enumerate() {
        if x.inst.flow() != (Flow::Branch { conditional: true }) {
            continue;
        }
        let Some(&t) = x.inst.branch_target(x.addr).and_then(|t| at.get(&t)) else {
            continue;
        };
        if x.inserted || t != i + 2 || !insts[t].inserted {
            continue;
        }
        if let Some(j) = (t..insts.len())
            .take_while(|&j| insts[j].inserted)
            .find(|&j| insts[j].inst.mnemonic() == "s_branch")
        {
            out.push((i, t, j));
        }
    }
    out
}

/// Marker words of the inserted instructions `from..to`.
fn markers_in(insts: &[sqtt_verify::LaidOut], from: usize, to: usize) -> Vec<u32> {
    (from..to).filter_map(|i| marker(insts, i)).collect()
}

/// Landing blocks on the `inlined` fixtures: as many in the output as the report planned, each
/// branch's taken edge runs the block's markers and its not-taken edge does not, the verifier
/// accepts the output, and rejects it with a block's exit marker replaced by `s_nop 0` (same
/// size) or with a block jumping to the branch's fall-through instead of its target.
#[test]
fn landing_blocks_verify_and_hand_broken_ones_are_rejected() {
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        ..Options::default()
    };
    let mut broken = 0;
    for t in ["gfx942", "gfx1100"] {
        for v in ["O3-g", "O3-gline"] {
            let name = format!("{t}__inlined__{v}.co");
            let orig = fixture(&name);
            let out = rewrite(&orig, &opts).expect("rewrite");
            assert_eq!(out.report.status, Status::Instrumented, "{name}");
            let new = out.bytes.expect("bytes");
            assert!(sqtt_verify::verify(&orig, &new).expect("verify").is_clean());
            let co = hsaco::CodeObject::parse(&new).expect("parse");
            let text = co.text().expect(".text");
            let isa = amdgpu_isa::Target::from_elf_mach(co.elf.header.e_flags & 0xff).expect("t");
            let file_off = |a: u64| (text.offset + a - text.addr) as usize;
            let mut found = 0;
            for (kernel, insts) in sqtt_verify::layout(&orig, &new).expect("layout") {
                for (b, first, jump) in landing_blocks(&insts) {
                    found += 1;
                    let taken = markers_in(&insts, first, jump);
                    assert!(!taken.is_empty(), "{name} {kernel}: empty landing block");
                    eprintln!(
                        "{name} {kernel}: {} at {:#x}: taken edge runs {taken:x?} first",
                        insts[b].inst.mnemonic(),
                        insts[b].addr
                    );
                    // (1) Remove the block's last exit marker.
                    if let Some(x) = (first..jump).rev().find(|&i| marker(&insts, i) == Some(1)) {
                        let mut bad = new.clone();
                        let o = file_off(insts[x].addr);
                        bad[o..o + 4].copy_from_slice(build::s_nop(isa, 0).unwrap().bytes());
                        let r = sqtt_verify::verify(&orig, &bad).expect("verify");
                        assert!(
                            r.findings.iter().any(|f| f.check == Check::Markers),
                            "{name} {kernel}: exit at {:#x} removed, not caught: {:#?}",
                            insts[x].addr,
                            r.findings
                        );
                        broken += 1;
                    }
                    // (2) Jump to the branch's fall-through target instead.
                    let ft = (b + 1..insts.len())
                        .find(|&i| !insts[i].inserted)
                        .expect("next");
                    let mut bad = new.clone();
                    let j = &insts[jump];
                    let d = ((insts[ft].addr as i64 - (j.addr as i64 + 4)) / 4) as i16;
                    let o = file_off(j.addr);
                    bad[o..o + 4].copy_from_slice(build::s_branch(isa, d).unwrap().bytes());
                    let r = sqtt_verify::verify(&orig, &bad).expect("verify");
                    assert!(
                        r.findings.iter().any(|f| f.check == Check::Branch),
                        "{name} {kernel}: wrong landing-block target not caught: {:#?}",
                        r.findings
                    );
                    broken += 1;
                }
            }
            assert_eq!(found, out.report.inlined.landing_blocks, "{name}");
            assert!(found > 0, "{name}");
        }
    }
    assert!(broken >= 8, "{broken}");
}
