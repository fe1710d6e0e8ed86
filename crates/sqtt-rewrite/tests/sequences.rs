//! Exact marker sequences, read back with llvm-objdump-22 (an oracle we did not write): for every
//! fixture instrumented with functions (threshold 1) and barriers, each `F:` function starts with
//! its enter word `(id << 2) | 2`, every return (`s_setpc_b64`/`s_set_pc_i64`) of it is
//! immediately preceded by the exit word `0x1`, and every `s_barrier` (and gfx12 signal/wait) is
//! adjacent to a point marker whose id is the funcmap's `barrier*` row, with the counts the report
//! gives.

use sqtt_funcmap::Row;
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (function name, Vec<instruction text>) from llvm-objdump-22 -d --no-show-raw-insn.
fn disassemble(file: &Path) -> Vec<(String, Vec<String>)> {
    let out = Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
        .args(["-d", "--no-show-raw-insn", "--no-leading-addr"])
        .arg(file)
        .output()
        .expect("llvm-objdump-22 (apt-get install llvm-22)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut funcs: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('<').and_then(|l| l.strip_suffix(">:")) {
            funcs.push((name.to_string(), Vec::new()));
        } else if let Some(f) = funcs.last_mut() {
            let t = line.trim();
            if !t.is_empty() {
                let t = t.split("//").next().unwrap_or("").trim().to_string();
                f.1.push(t);
            }
        }
    }
    funcs
}

fn parse_num(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else {
        s.parse::<i64>().ok().map(|v| v as u32)
    }
}

/// The marker word emitted by the sequence ending right before index `i` (skipping an M0 restore
/// `s_mov_b32 m0, X; s_nop 0` that may follow the `s_ttracedata`).
fn marker_before(ins: &[String], i: usize) -> Option<u32> {
    let mut j = i;
    if j >= 2 && ins[j - 1] == "s_nop 0" && ins[j - 2].starts_with("s_mov_b32 m0,") {
        j -= 2;
    }
    marker_ending_at(ins, j)
}

fn marker_ending_at(ins: &[String], j: usize) -> Option<u32> {
    let prev = ins.get(j.checked_sub(1)?)?;
    if let Some(v) = prev.strip_prefix("s_ttracedata_imm ") {
        return parse_num(v);
    }
    if prev == "s_ttracedata" && j >= 3 && ins[j - 2] == "s_nop 0" {
        return ins[j - 3]
            .strip_prefix("s_mov_b32 m0, ")
            .and_then(parse_num);
    }
    None
}

/// Marker right after index `i` (for after-placement around `s_barrier_signal`).
fn marker_after(ins: &[String], i: usize) -> Option<u32> {
    let rest = &ins[i + 1..];
    if let Some(v) = rest.first()?.strip_prefix("s_ttracedata_imm ") {
        return parse_num(v);
    }
    let mut k = 0;
    if rest.first()?.starts_with("s_mov_b32 s") {
        k = 1; // M0 save
    }
    if rest.get(k + 2).map(String::as_str) == Some("s_ttracedata")
        && rest.get(k + 1).map(String::as_str) == Some("s_nop 0")
    {
        return rest[k].strip_prefix("s_mov_b32 m0, ").and_then(parse_num);
    }
    None
}

#[test]
fn markers_sit_exactly_where_the_spec_says() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        barriers: true,
        ..Options::default()
    };
    let dir = root().join("fixtures/objects");
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = (0, 0, 0, 0);
    let mut failures = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let input = std::fs::read(&path).unwrap();
        let out = rewrite(&input, &opts).unwrap();
        if out.report.status != Status::Instrumented {
            continue;
        }
        let file = tmp.path().join(&name);
        std::fs::write(&file, out.bytes.as_ref().unwrap()).unwrap();
        // Dumped into this test's temporary directory, never through /dev (llvm-objcopy
        // replaces its output path with a renamed temporary file).
        let dump = file.with_extension("funcmap");
        let st = Command::new("/usr/lib/llvm-22/bin/llvm-objcopy")
            .arg(format!("--dump-section=.sqtt_funcmap={}", dump.display()))
            .arg(&file)
            .arg(file.with_extension("objcopy"))
            .status()
            .expect("llvm-objcopy-22");
        assert!(st.success(), "{name}: llvm-objcopy --dump-section failed");
        let fm = std::fs::read(&dump).expect("dumped .sqtt_funcmap");
        let rows = sqtt_funcmap::parse(&fm).rows;
        let fids: HashMap<String, u32> = rows
            .iter()
            .filter_map(|r| match r {
                Row::Function { id, name, .. } => Some((name.clone(), *id)),
                _ => None,
            })
            .collect();
        let pid = |n: &str| {
            rows.iter().find_map(|r| match r {
                Row::Point { id, name, .. } if name == n => Some(*id),
                _ => None,
            })
        };
        let skipped_barriers = out
            .report
            .skipped
            .iter()
            .filter(|s| format!("{:?}", s.kind).starts_with("Barrier"))
            .count();
        let mut barrier_markers = 0usize;
        let mut barrier_sites = 0usize;
        for (func, ins) in disassemble(&file) {
            if let Some(&id) = fids.get(&func) {
                checked.0 += 1;
                if marker_ending_at(&ins, 1).or_else(|| marker_ending_at(&ins, 3))
                    != Some((id << 2) | 2)
                {
                    failures.push(format!(
                        "{name} {func}: entry is not enter({id}): {:?}",
                        &ins[..ins.len().min(4)]
                    ));
                }
                for (i, t) in ins.iter().enumerate() {
                    if t.starts_with("s_setpc_b64 s[30:31]")
                        || t.starts_with("s_set_pc_i64 s[30:31]")
                    {
                        checked.1 += 1;
                        if marker_before(&ins, i) != Some(1) {
                            failures.push(format!(
                                "{name} {func}: return #{i} not preceded by exit: {:?}",
                                &ins[i.saturating_sub(4)..=i]
                            ));
                        }
                    }
                }
            }
            let mut i = 0;
            while i < ins.len() {
                let t = &ins[i];
                if t == "s_barrier" {
                    barrier_sites += 1;
                    if pid("barrier").is_some_and(|id| marker_before(&ins, i) == Some(id << 2)) {
                        barrier_markers += 1;
                    }
                } else if t.starts_with("s_barrier_signal") {
                    barrier_sites += 1;
                    let want = ins[i + 1..]
                        .iter()
                        .take_while(|x| !x.starts_with("s_barrier"))
                        .count();
                    let paired = ins
                        .get(i + 1 + want)
                        .is_some_and(|x| x.starts_with("s_barrier_wait"));
                    let key = if paired { "barrier" } else { "barrier_signal" };
                    if marker_after(&ins, i) == pid(key).map(|id| id << 2) && pid(key).is_some() {
                        barrier_markers += 1;
                    }
                    if paired {
                        i += 1 + want; // the wait is covered by the pair's marker
                    }
                } else if t.starts_with("s_barrier_wait") {
                    barrier_sites += 1;
                    if marker_before(&ins, i) == pid("barrier_wait").map(|id| id << 2)
                        && pid("barrier_wait").is_some()
                    {
                        barrier_markers += 1;
                    }
                }
                i += 1;
            }
        }
        checked.2 += barrier_sites;
        checked.3 += barrier_markers;
        if barrier_markers + skipped_barriers != barrier_sites {
            failures.push(format!("{name}: {barrier_sites} barrier sites, {barrier_markers} markers adjacent, {skipped_barriers} skipped"));
        }
    }
    eprintln!(
        "functions {} returns {} barrier sites {} barrier markers {}",
        checked.0, checked.1, checked.2, checked.3
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked.0 > 500 && checked.1 > 500 && checked.3 > 500,
        "too little checked: {checked:?}"
    );
}
