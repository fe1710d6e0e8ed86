//! Checks `dwarf_remap::locations` against LLVM 22 on the real `-g` and Triton code objects of
//! the corpus: function definition sites against llvm-dwarfdump-22 (`DW_AT_decl_file`,
//! `DW_AT_decl_line`, followed through `DW_AT_abstract_origin` / `DW_AT_specification`), and
//! inline chains against llvm-symbolizer-22 `--inlining` (file:line per frame, innermost first)
//! for every 7th instruction listed by llvm-objdump-22.
//!
//! Needs LLVM 22 (fails without it unless `SQTT_NO_LLVM=1`) and `<workspace>/fixtures/corpus`.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dwarf_remap::{
    function_locations, inline_chain, read_debug_sections, render_chain, LocationIndex, SourceLoc,
};

fn corpus() -> PathBuf {
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    assert!(
        c.is_dir(),
        "corpus not found at {} (expected <workspace root>/fixtures/corpus)",
        c.display()
    );
    c
}

/// Path of an LLVM 22 tool, or None when SQTT_NO_LLVM=1 and it is missing.
fn tool(name: &str) -> Option<PathBuf> {
    let p = Path::new("/usr/lib/llvm-22/bin").join(name);
    if p.exists() {
        return Some(p);
    }
    let versioned = PathBuf::from(format!("{name}-22"));
    let ok = Command::new(&versioned)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(versioned);
    }
    if std::env::var("SQTT_NO_LLVM").as_deref() == Ok("1") {
        return None;
    }
    panic!("{name} (LLVM 22) not found; set SQTT_NO_LLVM=1 to skip");
}

fn run(tool: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn LLVM tool");
    let input = stdin.unwrap_or_default().to_string();
    let mut pipe = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("run LLVM tool");
    writer.join().expect("writer").expect("write stdin");
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `-g` HIP objects and the Triton objects.
fn inputs() -> Vec<PathBuf> {
    let c = corpus();
    let mut v = Vec::new();
    for e in std::fs::read_dir(c.join("compiled")).expect("compiled dir") {
        let p = e.expect("entry").path();
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if n.ends_with(".co") && n.contains("-g") {
            v.push(p);
        }
    }
    for e in std::fs::read_dir(c.join("triton")).expect("triton dir") {
        v.push(e.expect("entry").path());
    }
    v.sort();
    assert!(
        v.len() >= 40,
        "expected the -g and triton corpus, found {}",
        v.len()
    );
    v
}

/// One DIE from llvm-dwarfdump: tag and attribute name -> printed value (inside the outer
/// parentheses).
struct Die {
    tag: String,
    attrs: HashMap<String, String>,
}

fn parse_dwarfdump(text: &str) -> HashMap<u64, Die> {
    let mut dies = HashMap::new();
    let mut current: Option<(u64, Die)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some((off, rest)) = t.split_once(':') {
            let rest = rest.trim();
            if off.starts_with("0x") && rest.starts_with("DW_TAG_") {
                if let Some((o, d)) = current.take() {
                    dies.insert(o, d);
                }
                let o = u64::from_str_radix(&off[2..], 16).expect("DIE offset");
                let die = Die {
                    tag: rest.to_string(),
                    attrs: HashMap::new(),
                };
                current = Some((o, die));
                continue;
            }
        }
        if let (Some(name), Some((_, die))) = (t.strip_prefix("DW_AT_"), current.as_mut()) {
            if let Some((n, v)) = name.split_once('\t') {
                let v = v.trim();
                let v = v.strip_prefix('(').unwrap_or(v);
                let v = v.strip_suffix(')').unwrap_or(v);
                die.attrs
                    .insert(format!("DW_AT_{}", n.trim()), v.to_string());
            }
        }
    }
    if let Some((o, d)) = current {
        dies.insert(o, d);
    }
    dies
}

/// `DWARFDie::findRecursively` on the dump: the DIE, then its abstract origin/specification.
fn find_attr<'a>(dies: &'a HashMap<u64, Die>, start: u64, attr: &str) -> Option<&'a str> {
    let mut queue = vec![start];
    let mut seen = HashSet::new();
    let mut i = 0;
    while let Some(&o) = queue.get(i) {
        i += 1;
        if !seen.insert(o) {
            continue;
        }
        let die = dies.get(&o)?;
        if let Some(v) = die.attrs.get(attr) {
            return Some(v);
        }
        for r in ["DW_AT_abstract_origin", "DW_AT_specification"] {
            if let Some(v) = die.attrs.get(r) {
                let hex = v.split_whitespace().next().expect("ref");
                queue.push(u64::from_str_radix(&hex[2..], 16).expect("ref offset"));
            }
        }
    }
    None
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

/// FUNC symbols (name, value) from llvm-readelf-22.
fn func_symbols(readelf: &Path, file: &Path) -> Vec<(String, u64)> {
    let text = run(
        readelf,
        &["-s", "--wide", file.to_str().expect("path")],
        None,
    );
    let mut v = Vec::new();
    let mut seen = HashSet::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 8 && f[3] == "FUNC" {
            let value = u64::from_str_radix(f[1], 16).expect("symbol value");
            if seen.insert((f[7].to_string(), value)) {
                v.push((f[7].to_string(), value));
            }
        }
    }
    v
}

#[test]
fn function_locations_match_dwarfdump() {
    let (Some(dwarfdump), Some(readelf)) = (tool("llvm-dwarfdump"), tool("llvm-readelf")) else {
        return;
    };
    let (mut agree, mut no_decl, mut without_dwarf, mut files) = (0usize, 0usize, 0usize, 0usize);
    let mut mismatches = Vec::new();
    for path in inputs() {
        let elf = std::fs::read(&path).expect("read");
        let sections = read_debug_sections(&elf).expect("debug sections");
        let locs = function_locations(&sections).expect("function_locations");
        let p = path.to_str().expect("path");
        let dies = parse_dwarfdump(&run(&dwarfdump, &["--debug-info", p], None));
        let by_low_pc: HashMap<u64, u64> = dies
            .iter()
            .filter(|(_, d)| d.tag == "DW_TAG_subprogram")
            .filter_map(|(&o, d)| {
                let lo = d.attrs.get("DW_AT_low_pc")?;
                Some((u64::from_str_radix(&lo[2..], 16).expect("low_pc"), o))
            })
            .collect();
        files += 1;
        for (name, value) in func_symbols(&readelf, &path) {
            let Some(&die) = by_low_pc.get(&value) else {
                without_dwarf += 1;
                continue;
            };
            let file = find_attr(&dies, die, "DW_AT_decl_file").map(unquote);
            let line = find_attr(&dies, die, "DW_AT_decl_line").and_then(|l| l.parse().ok());
            let key = find_attr(&dies, die, "DW_AT_linkage_name")
                .or_else(|| find_attr(&dies, die, "DW_AT_name"))
                .map(unquote);
            let expected = match (file, line) {
                (Some(file), Some(line)) => Some(SourceLoc {
                    file: file.to_string(),
                    line,
                }),
                _ => None,
            };
            let got = locs.get(&name);
            if key == Some(name.as_str()) && got == expected.as_ref() {
                agree += 1;
                no_decl += usize::from(got.is_none());
            } else {
                mismatches.push(format!(
                    "{}: {name} (DWARF key {key:?}): got {got:?}, llvm-dwarfdump {expected:?}",
                    path.display()
                ));
            }
        }
    }
    eprintln!(
        "function_locations: {agree} FUNC symbols agree with llvm-dwarfdump-22 \
         ({no_decl} of them without DW_AT_decl_file in both), {} differ, {without_dwarf} without a DWARF subprogram, {files} objects",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(
        agree - no_decl >= 400,
        "only {} functions with a definition site compared",
        agree - no_decl
    );
}

/// Instruction addresses from llvm-objdump-22 (`// 000000004B00: ...` comments).
fn instruction_addresses(objdump: &Path, file: &Path) -> Vec<u64> {
    let text = run(objdump, &["-d", file.to_str().expect("path")], None);
    text.lines()
        .filter_map(|l| {
            let (_, c) = l.split_once("// ")?;
            let (hex, _) = c.split_once(':')?;
            u64::from_str_radix(hex, 16).ok()
        })
        .collect()
}

/// llvm-symbolizer-22 `--inlining` frames per address: `file:line` (column dropped).
fn symbolize(symbolizer: &Path, file: &Path, addrs: &[u64]) -> Vec<Vec<SourceLoc>> {
    let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
    let obj = format!("--obj={}", file.display());
    let text = run(symbolizer, &[&obj, "--inlining"], Some(&input));
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let lines: Vec<&str> = block.lines().collect();
        if lines.is_empty() {
            continue;
        }
        let mut frames = Vec::new();
        for pair in lines.chunks(2) {
            let loc = pair.get(1).expect("file:line:column line");
            let mut it = loc.rsplitn(3, ':');
            let (_col, line, file) = (it.next(), it.next(), it.next());
            let line: u64 = line.and_then(|l| l.parse().ok()).expect("line");
            let file = file.expect("file").to_string();
            if file != "??" {
                frames.push(SourceLoc { file, line });
            }
        }
        out.push(frames);
    }
    assert_eq!(out.len(), addrs.len(), "one symbolizer block per address");
    out
}

#[test]
fn inline_chains_match_symbolizer() {
    let (Some(objdump), Some(symbolizer)) = (tool("llvm-objdump"), tool("llvm-symbolizer")) else {
        return;
    };
    let (mut agree, mut inlined, mut empty) = (0usize, 0usize, 0usize);
    let mut mismatches = Vec::new();
    for path in inputs() {
        let elf = std::fs::read(&path).expect("read");
        let sections = read_debug_sections(&elf).expect("debug sections");
        let index = LocationIndex::new(&sections).expect("index");
        let addrs: Vec<u64> = instruction_addresses(&objdump, &path)
            .into_iter()
            .step_by(7)
            .collect();
        assert!(!addrs.is_empty(), "{}: no instructions", path.display());
        let expected = symbolize(&symbolizer, &path, &addrs);
        for (&a, want) in addrs.iter().zip(&expected) {
            let got = index.chain(a);
            if got == *want {
                agree += 1;
                inlined += usize::from(got.len() > 1);
                empty += usize::from(got.is_empty());
            } else {
                mismatches.push(format!(
                    "{} {a:#x}: got [{}], llvm-symbolizer [{}]",
                    path.display(),
                    render_chain(&got),
                    render_chain(want)
                ));
            }
        }
    }
    eprintln!(
        "inline_chain: {agree} addresses agree with llvm-symbolizer-22 ({inlined} with inlined \
         frames, {empty} without line info), {} differ",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(
        agree >= 1000 && inlined >= 100,
        "{agree} compared, {inlined} inlined"
    );
}

#[test]
fn free_function_and_rendering_agree_with_index() {
    let path = corpus().join("compiled/gfx1100__hip-mini__O3-g.co");
    let elf = std::fs::read(&path).expect("read");
    let sections = read_debug_sections(&elf).expect("debug sections");
    let index = LocationIndex::new(&sections).expect("index");
    // 0x5100: `tid_x()` inlined into `lds_reduce` (llvm-symbolizer-22: mini_hip.h:22 then
    // kernels.hip:50).
    let chain = inline_chain(&sections, 0x5100).expect("chain");
    assert_eq!(chain, index.chain(0x5100));
    assert_eq!(
        render_chain(&chain),
        "/corpus/src/mini_hip.h:22 -> /corpus/src/kernels.hip:50"
    );
    assert_eq!(render_chain(&[]), "");
    assert!(index.chain(0).is_empty(), "no line info below .text");
    assert_eq!(
        index.functions().get("lds_reduce").map(ToString::to_string),
        Some("/corpus/src/kernels.hip:48".to_string())
    );
    assert!(index.functions().keys().all(|k| !k.contains('@')));
}

#[test]
fn no_dwarf_gives_empty_results() {
    let empty = HashMap::new();
    assert!(function_locations(&empty).expect("empty").is_empty());
    assert!(inline_chain(&empty, 0x1000).expect("empty").is_empty());
}

#[test]
fn truncated_debug_info_is_an_error() {
    let path = corpus().join("compiled/gfx1100__hip-mini__O3-g.co");
    let elf = std::fs::read(&path).expect("read");
    let mut sections = read_debug_sections(&elf).expect("debug sections");
    let info = sections.get_mut(".debug_info").expect(".debug_info");
    info.truncate(info.len() / 2);
    assert!(LocationIndex::new(&sections).is_err());
}
