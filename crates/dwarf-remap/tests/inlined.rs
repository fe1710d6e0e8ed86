//! Checks `dwarf_remap::inlined_scopes` against llvm-dwarfdump-22 `--debug-info` on the
//! `inlined` fixtures (`-O3 -g` and `-O3 -gline-tables-only`, gfx942 and gfx1100) and the `-g`
//! objects of the shared corpus: every `DW_TAG_inlined_subroutine` with its DIE offset, enclosing
//! inlined instance, name of the abstract origin (as llvm-dwarfdump prints it: the linkage name
//! when there is one), declaration site of the origin, call line and code ranges.
//!
//! Needs LLVM 22 at /usr/lib/llvm-22/bin (CI installs it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dwarf_remap::{inlined_scopes, read_debug_sections};

/// One inlined instance as llvm-dwarfdump prints it.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    die: u64,
    parent: Option<u64>,
    name: String,
    decl: Option<(String, u64)>,
    call_line: u64,
    ranges: Vec<(u64, u64)>,
}

/// A DIE of the dump: offset, tag, nesting column, attribute lines.
struct Die {
    off: u64,
    tag: String,
    col: usize,
    attrs: Vec<String>,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).expect("hex")
}

fn quoted(line: &str) -> Option<String> {
    let a = line.find('"')?;
    let b = line.rfind('"')?;
    (b > a).then(|| line[a + 1..b].to_string())
}

fn paren_num(line: &str) -> Option<u64> {
    let a = line.rfind('(')?;
    let b = line.rfind(')')?;
    line.get(a + 1..b)?.trim().parse().ok()
}

fn dies(dump: &str) -> Vec<Die> {
    let mut out: Vec<Die> = Vec::new();
    for line in dump.lines() {
        if let Some((off, rest)) = line.split_once(": ") {
            if off.starts_with("0x") && rest.trim_start().starts_with("DW_TAG_") {
                out.push(Die {
                    off: hex(off),
                    tag: rest.trim().to_string(),
                    col: rest.len() - rest.trim_start().len(),
                    attrs: Vec::new(),
                });
                continue;
            }
            if off.starts_with("0x") {
                // A unit header or a NULL entry.
                if rest.trim() == "NULL" {
                    out.push(Die {
                        off: hex(off),
                        tag: "NULL".into(),
                        col: rest.len() - rest.trim_start().len(),
                        attrs: Vec::new(),
                    });
                }
                continue;
            }
        }
        if let Some(d) = out.last_mut() {
            if !line.trim().is_empty() {
                d.attrs.push(line.trim().to_string());
            }
        }
    }
    out
}

fn expected(dump: &str) -> Vec<Expected> {
    let all = dies(dump);
    let by_off: HashMap<u64, &Die> = all.iter().map(|d| (d.off, d)).collect();
    let attr = |d: &Die, name: &str| {
        d.attrs
            .iter()
            .find(|a| a.split_whitespace().next() == Some(name))
            .cloned()
    };
    let mut out = Vec::new();
    // (column, offset, tag) of the open ancestors.
    let mut stack: Vec<(usize, u64, String)> = Vec::new();
    for d in &all {
        while stack.last().is_some_and(|(c, _, _)| *c >= d.col) {
            stack.pop();
        }
        if d.tag == "NULL" {
            continue;
        }
        if d.tag == "DW_TAG_inlined_subroutine" {
            let parent = stack
                .iter()
                .rev()
                .find(|(_, _, t)| t == "DW_TAG_inlined_subroutine" || t == "DW_TAG_subprogram")
                .filter(|(_, _, t)| t == "DW_TAG_inlined_subroutine")
                .map(|(_, o, _)| *o);
            let origin_line = attr(d, "DW_AT_abstract_origin").expect("abstract origin");
            let origin = hex(origin_line
                .split('(')
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .expect("origin offset"));
            // The origin, then what its DW_AT_specification / DW_AT_abstract_origin names
            // (a member function's definition refers to its declaration in the class).
            let mut chain = vec![*by_off.get(&origin).expect("origin DIE")];
            while let Some(next) = ["DW_AT_specification", "DW_AT_abstract_origin"]
                .iter()
                .find_map(|a| attr(chain.last().unwrap(), a))
                .and_then(|l| l.split('(').nth(1)?.split_whitespace().next().map(hex))
                .and_then(|o| by_off.get(&o))
            {
                if chain.len() > 8 {
                    break;
                }
                chain.push(next);
            }
            let lookup = |name: &str| chain.iter().find_map(|d| attr(d, name));
            let decl = match (lookup("DW_AT_decl_file"), lookup("DW_AT_decl_line")) {
                (Some(f), Some(l)) => {
                    Some((quoted(&f).expect("file"), paren_num(&l).expect("line")))
                }
                _ => None,
            };
            let mut ranges = Vec::new();
            if let (Some(lo), Some(hi)) = (attr(d, "DW_AT_low_pc"), attr(d, "DW_AT_high_pc")) {
                let v = |l: &str| hex(l.split('(').nth(1).unwrap().trim_end_matches(')'));
                ranges.push((v(&lo), v(&hi)));
            }
            for a in &d.attrs {
                if let Some(r) = a.strip_prefix('[') {
                    let r = r.trim_end_matches(')').trim_end_matches(')');
                    let (b, e) = r.split_once(',').expect("range");
                    let (b, e) = (hex(b), hex(e));
                    if b < e {
                        ranges.push((b, e));
                    }
                }
            }
            ranges.sort_unstable();
            out.push(Expected {
                die: d.off,
                parent,
                name: quoted(&origin_line).unwrap_or_default(),
                decl,
                call_line: attr(d, "DW_AT_call_line")
                    .and_then(|l| paren_num(&l))
                    .unwrap_or(0),
                ranges,
            });
        }
        stack.push((d.col, d.off, d.tag.clone()));
    }
    out
}

fn check(path: &Path) -> usize {
    let bytes = std::fs::read(path).expect("read");
    let sections = read_debug_sections(&bytes).expect("debug sections");
    let ours = inlined_scopes(&sections).expect("inlined scopes");
    let dump = Command::new("/usr/lib/llvm-22/bin/llvm-dwarfdump")
        .arg("--debug-info")
        .arg(path)
        .output()
        .expect("llvm-dwarfdump-22");
    assert!(dump.status.success(), "{}", path.display());
    let want = expected(&String::from_utf8_lossy(&dump.stdout));
    let got: Vec<Expected> = ours
        .iter()
        .map(|s| Expected {
            die: s.die,
            parent: s.parent.map(|p| ours[p].die),
            name: s.name.clone(),
            decl: s.decl.as_ref().map(|d| (d.file.clone(), d.line)),
            call_line: s.call.line,
            ranges: s.ranges.clone(),
        })
        .collect();
    assert_eq!(got, want, "{}", path.display());
    ours.len()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn inlined_fixtures_match_llvm_dwarfdump() {
    let mut counts = Vec::new();
    for t in ["gfx942", "gfx1100"] {
        for v in ["O3-g", "O3-gline"] {
            let p = root().join(format!("fixtures/objects/{t}__inlined__{v}.co"));
            let n = check(&p);
            counts.push(n);
            let bytes = std::fs::read(&p).expect("read");
            let s =
                inlined_scopes(&read_debug_sections(&bytes).expect("sections")).expect("scopes");
            // The source nests kernel -> reduce_rows -> hash_row -> mix (depth 2 below the
            // outermost inlined instance) and inlines hash_row twice into k_twice.
            let depth = s.iter().map(|x| x.depth(&s)).max();
            assert!(depth >= Some(2), "{t} {v}: depth {depth:?}");
            let hash_rows = s.iter().filter(|x| x.name.contains("hash_row")).count();
            assert!(hash_rows >= 3, "{t} {v}: {hash_rows} hash_row instances");
            assert!(s.iter().all(|x| x.function.is_some()), "{t} {v}");
            // -gline-tables-only: names only, no declaration sites.
            assert_eq!(v == "O3-g", s.iter().all(|x| x.decl.is_some()), "{t} {v}");
        }
    }
    assert!(counts.iter().all(|&n| n >= 8), "{counts:?}");
}

#[test]
fn corpus_debug_objects_match_llvm_dwarfdump() {
    let dir = root().join("fixtures/corpus/compiled");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        panic!("corpus not found at {}", dir.display());
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("-g") && p.extension().is_some_and(|x| x == "co"))
        .collect();
    files.sort();
    let total: usize = files.iter().map(|p| check(p)).sum();
    assert!(
        !files.is_empty() && total > 0,
        "{} files, {total} scopes",
        files.len()
    );
}
