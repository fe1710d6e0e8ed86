//! Shared by the tests of scopes inside functions (`loops.rs`, `regions.rs`) on
//! `fixtures/loops` (`fixtures/src/loops.S`, built with `-g`): instrumenting, reading the
//! funcmap, running the kernel `k_loops` in the interpreter, llvm-objdump-22. Included with
//! `#[path]` by the tests that use it.
#![allow(dead_code)] // not every test file that includes this module uses every helper

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// `fixtures/loops/<target>__loops__g.co`.
pub fn fixture(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/loops")
        .join(format!("{target}__loops__g.co"))
}

/// Line (1-based) in `fixtures/src/loops.S` of the instruction after `label:`.
pub fn source_line(label: &str) -> usize {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/src/loops.S"),
    )
    .unwrap();
    let at = src
        .lines()
        .position(|l| l.trim() == format!("{label}:"))
        .unwrap_or_else(|| panic!("label {label}"));
    at + 2
}

/// Instruments `input` with `flags` into `dir`, returns the output bytes and the JSON report.
pub fn instrument(dir: &Path, input: &Path, flags: &[&str]) -> (Vec<u8>, Value) {
    let out = dir.join("out.co");
    let report = dir.join("report.json");
    let st = Command::new(BIN)
        .arg(input)
        .arg("-o")
        .arg(&out)
        .args(flags)
        .arg("--report-json")
        .arg(&report)
        .status()
        .unwrap();
    assert!(st.success(), "{input:?} {flags:?}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (std::fs::read(&out).unwrap(), r)
}

/// The `.sqtt_funcmap` rows of `bytes`.
pub fn funcmap(bytes: &[u8]) -> Vec<sqtt_funcmap::Row> {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let s = co
        .elf
        .sections
        .iter()
        .find(|s| s.name == ".sqtt_funcmap")
        .expect(".sqtt_funcmap");
    sqtt_funcmap::parse(co.section_data(s)).rows
}

/// Marker names by id (`U:`, `F:` and `P:` rows; a `U:` row's location after ` @`).
pub fn scope_names(rows: &[sqtt_funcmap::Row]) -> BTreeMap<u32, String> {
    use sqtt_funcmap::Row;
    rows.iter()
        .filter_map(|r| match r {
            Row::User { id, name, loc } => Some((
                *id,
                loc.as_ref()
                    .map_or(name.clone(), |l| format!("{name} @{l}")),
            )),
            Row::Function { id, name, .. } | Row::Point { id, name, .. } => {
                Some((*id, name.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The kernel `k_loops` run whole in the interpreter: its shaderdata words.
pub fn run_kernel(target: &str, wave: u32, bytes: &[u8]) -> Vec<u32> {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let sec = co.text().expect(".text");
    let code = co.section_data(sec);
    let entry = co
        .kernels
        .iter()
        .find(|k| k.name == "k_loops")
        .unwrap()
        .entry;
    let t = amdgpu_isa::Target::from_name(target).unwrap();
    let mut w = sqtt_interp::Wave::new(t, wave).unwrap();
    let r = sqtt_interp::run(&mut w, &code[(entry - sec.addr) as usize..], entry, 10_000)
        .expect("interpreter");
    r.shaderdata
}

/// Marker words as `+name` (enter), `-` (exit) and `*name` (point).
pub fn stream(words: &[u32], names: &BTreeMap<u32, String>) -> Vec<String> {
    words
        .iter()
        .map(|&v| match v & 3 {
            1 if v == 1 => "-".to_string(),
            2 => format!("+{}", names.get(&(v >> 2)).expect("enter id has a row")),
            0 => format!("*{}", names.get(&(v >> 2)).expect("point id has a row")),
            _ => panic!("marker word {v:#x} is neither an enter nor an exit"),
        })
        .collect()
}

pub fn llvm_present() -> bool {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        eprintln!("SQTT_NO_LLVM set: the llvm-objdump-22 checks are off");
        return false;
    }
    true
}

/// Original address of each instruction of `input` as llvm-objdump-22 prints it.
pub fn objdump(input: &Path) -> BTreeMap<u64, String> {
    let out = Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
        .arg("-d")
        .arg(input)
        .output()
        .expect("llvm-objdump-22 (install llvm-22: tools/setup.sh)");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (ins, rest) = l.split_once("//")?;
            let a = u64::from_str_radix(rest.trim().split(':').next()?, 16).ok()?;
            Some((a, ins.trim().to_string()))
        })
        .collect()
}

/// The verifier proves scopes balanced: `bytes` (gfx11, the instrumented `orig`) with any one
/// of its exit markers replaced by `s_nop 0` (same size) is rejected. Returns how many exit
/// markers were taken out one at a time.
pub fn each_exit_is_needed(orig: &[u8], bytes: &[u8]) -> usize {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let sec = co.text().unwrap();
    let off = sec.offset as usize;
    let text = co.section_data(sec).to_vec();
    // `s_ttracedata_imm 0x1` (gfx11 SOPP, opcode 58: 0xbfbb0001) -> `s_nop 0` (0xbf800000).
    let exit = 0xbfbb_0001u32.to_le_bytes();
    let exits: Vec<usize> = (0..text.len() / 4)
        .map(|i| i * 4)
        .filter(|&k| text[k..k + 4] == exit)
        .collect();
    for &k in &exits {
        let mut broken = bytes.to_vec();
        broken[off + k..off + k + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
        let v = sqtt_verify::verify(orig, &broken).unwrap();
        assert!(
            !v.findings.is_empty(),
            "exit marker at .text+{k:#x} taken out and accepted"
        );
    }
    exits.len()
}

/// Writes a rocprofv3-style capture of one wave emitting `words` (one record every 10 cycles)
/// with the funcmap `rows`, and returns `sqtt-patch flamegraph --folded` of it.
pub fn flamegraph(dir: &Path, rows: &[sqtt_funcmap::Row], words: &[u32]) -> String {
    use sqtt_funcmap::Row;
    let ui = dir.join("capture/ui_output_agent_1_dispatch_1");
    std::fs::create_dir_all(&ui).unwrap();
    let fm: Vec<Value> = rows
        .iter()
        .filter_map(|r| match r {
            Row::User { id, name, loc } => Some(json!([
                1,
                id,
                "U",
                name,
                loc.clone().unwrap_or_default(),
                null
            ])),
            Row::Function { id, name, loc } => Some(json!([
                1,
                id,
                "F",
                name,
                loc.clone().unwrap_or_default(),
                null
            ])),
            Row::Kernel { name, .. } => Some(json!([1, null, "K", name, "", 4096])),
            _ => None,
        })
        .collect();
    std::fs::write(
        ui.join("code.json"),
        json!({"code": [], "sqtt_funcmap": fm}).to_string(),
    )
    .unwrap();
    let end = 100 + 10 * (words.len() as i64 + 1);
    std::fs::write(
        ui.join("occupancy.json"),
        json!({"0": [[100, 0, 0, 0, 1, 1], [end, 0, 0, 0, 0, 1]],
            "dispatches": {"1": "k_loops"}, "version": "3.0.0"})
        .to_string(),
    )
    .unwrap();
    let recs: Vec<[i64; 6]> = words
        .iter()
        .enumerate()
        .map(|(i, &v)| [110 + 10 * i as i64, i64::from(v), 0, 0, 0, 0])
        .collect();
    std::fs::write(
        ui.join("shaderdata_0_0.json"),
        json!({"type": "shaderdata", "begin_time": recs[0][0], "end_time": recs[recs.len() - 1][0],
            "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
            "records_count": recs.len(), "records": recs})
        .to_string(),
    )
    .unwrap();
    let folded = dir.join("flame.folded");
    let out = Command::new(BIN)
        .arg("flamegraph")
        .arg(dir.join("capture"))
        .arg("-o")
        .arg(dir.join("flame.svg"))
        .arg("--folded")
        .arg(&folded)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(folded).unwrap()
}
