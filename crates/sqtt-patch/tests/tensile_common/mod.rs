//! Shared by the Tensile-fixture tests: the fixtures of
//! `fixtures/tensile` and variants of `fixtures/src/tensile.S` assembled by `clang-22`, runs of
//! `sqtt-patch` and `sqtt-patch verify`, and the `llvm-objdump-22` and symbol-table oracles.
//! Included by `tensile.rs`, `tensile_signed.rs` and `tensile_subroutines.rs`, each of which uses
//! a part of it.
#![allow(dead_code)]

use object::{Object, ObjectSection, ObjectSymbol};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// The fixture targets: forward and backward long branches in each (gfx9 wave64, gfx11 and
/// gfx12 `_co` wave32).
pub const TARGETS: [&str; 4] = ["gfx908", "gfx90a", "gfx1100", "gfx1201"];

/// The flag sets of the issue, by name.
pub const CONFIGS: [(&str, &[&str]); 3] = [
    (
        "fb",
        &["--functions", "1", "--barriers", "1", "--kernel-scopes"],
    ),
    ("mem", &["--memory", "2:5"]),
    ("trace", &["--trace-addresses", "memory,lds"]),
];

pub fn fixture(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tensile")
        .join(format!("{target}__tensile__O3.co"))
}

/// `tensile.S` assembled for `target` with the extra kernel that `-D<define>` adds.
pub fn variant(dir: &Path, target: &str, define: &str) -> Option<PathBuf> {
    if no_llvm() {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/src");
    let out = dir.join(format!("{target}__tensile__{define}.co"));
    let family: &[&str] = match target {
        "gfx90a" => &["-DFX_GFX9", "-DFX_ACCUM"],
        t if t.starts_with("gfx9") => &["-DFX_GFX9"],
        t if t.starts_with("gfx12") => &["-DFX_GFX12"],
        _ => &[],
    };
    let o = Command::new("clang-22")
        .current_dir(&src)
        .args(["-x", "assembler-with-cpp", "-target", "amdgcn-amd-amdhsa"])
        .arg(format!("-mcpu={target}"))
        .arg(format!("-DFX_TARGET={target}"))
        .args(family)
        .arg(format!("-D{define}"))
        .args(["tensile.S", "-o"])
        .arg(&out)
        .output()
        .expect("clang-22 (LLVM 22) is needed: tools/setup.sh");
    assert!(
        o.status.success(),
        "clang-22 {target}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(out)
}

/// Asserts that the report `r` leaves exactly the function `name` alone, for a reason that
/// contains `why`.
pub fn only_left_alone(ctx: &str, r: &Value, name: &str, why: &str) {
    let left = r["left_alone"].as_array().expect("left_alone");
    assert_eq!(left.len(), 1, "{ctx}: {left:?}");
    assert_eq!(left[0]["name"], name, "{ctx}");
    let got = left[0]["why"].as_str().unwrap_or_default();
    assert!(got.contains(why), "{ctx}: {got}");
}

/// `sqtt-patch verify ORIG NEW`: exit code and stdout + stderr.
pub fn verify(orig: &Path, new: &Path) -> (i32, String) {
    let o = Command::new(BIN)
        .arg("verify")
        .arg(orig)
        .arg(new)
        .output()
        .expect("run sqtt-patch verify");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

/// Runs `sqtt-patch IN -o DIR/TARGET.NAME.co FLAGS --report-json ...`: exit code, output path,
/// the report, and the printed text for messages.
pub fn patch(
    dir: &Path,
    input: &Path,
    target: &str,
    name: &str,
    flags: &[&str],
) -> (PathBuf, Value) {
    let (out, r, _) = patch_with_context(dir, input, target, name, flags);
    (out, r)
}

/// [`patch`], also returning the printed text (for later assertion messages).
pub fn patch_with_context(
    dir: &Path,
    input: &Path,
    target: &str,
    name: &str,
    flags: &[&str],
) -> (PathBuf, Value, String) {
    let out = dir.join(format!("{target}.{name}.co"));
    let json = dir.join(format!("{target}.{name}.json"));
    let o = Command::new(BIN)
        .arg(input)
        .arg("-o")
        .arg(&out)
        .args(flags)
        .arg("--report-json")
        .arg(&json)
        .output()
        .expect("run sqtt-patch");
    let ctx = format!(
        "{target} {name}:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
    assert_eq!(r["status"], "instrumented", "{ctx}");
    (out, r, ctx)
}

/// One instruction as `llvm-objdump-22 -d` prints it.
#[derive(Debug, Clone)]
pub struct Insn {
    pub addr: u64,
    /// The text without the encoding comment, blanks collapsed.
    pub text: String,
    pub mnemonic: String,
    pub operands: Vec<String>,
}

/// `SQTT_NO_LLVM=1`: the llvm-objdump-22 checks are skipped (docs/testing.md).
pub fn no_llvm() -> bool {
    let off = std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1");
    if off {
        eprintln!("not checked: SQTT_NO_LLVM=1 (the llvm-objdump-22 oracle)");
    }
    off
}

pub fn objdump(path: &Path) -> Vec<Insn> {
    let o = Command::new("llvm-objdump-22")
        .arg("-d")
        .arg(path)
        .output()
        .expect("llvm-objdump-22 (LLVM 22) is needed: tools/setup.sh");
    assert!(o.status.success(), "llvm-objdump-22 -d {}", path.display());
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let Some((text, enc)) = line.split_once("//") else {
            continue;
        };
        let Some((addr, _)) = enc.trim().split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let (mnemonic, rest) = text.split_once(' ').unwrap_or((&text, ""));
        v.push(Insn {
            addr,
            mnemonic: mnemonic.to_string(),
            operands: rest.split(", ").map(|s| s.trim().to_string()).collect(),
            text: text.clone(),
        });
    }
    v
}

/// A 32-bit operand as objdump prints it (`0x138`, `0xffffff58`, `4`, `-4`, `lit(0x40)`: a
/// literal holding an inline-constant value).
pub fn int_operand(s: &str) -> u32 {
    let s = s
        .strip_prefix("lit(")
        .and_then(|x| x.strip_suffix(')'))
        .unwrap_or(s);
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).unwrap_or_else(|_| panic!("operand {s}")),
        None => s.parse::<i64>().unwrap_or_else(|_| panic!("operand {s}")) as u32,
    }
}

/// The symbols of an object: local `label_*` by address and by name, kernels (`STT_FUNC`) by
/// name with (address, size), the `.text` address, file offset and bytes.
pub struct Syms {
    pub label_at: BTreeMap<u64, String>,
    pub label: BTreeMap<String, u64>,
    pub kernels: BTreeMap<String, (u64, u64)>,
    pub text_addr: u64,
    pub text_offset: u64,
    pub text: Vec<u8>,
}

pub fn syms(path: &Path) -> Syms {
    let data = std::fs::read(path).expect("read object");
    let f = object::File::parse(&*data).expect("ELF");
    let mut s = Syms {
        label_at: BTreeMap::new(),
        label: BTreeMap::new(),
        kernels: BTreeMap::new(),
        text_addr: 0,
        text_offset: 0,
        text: Vec::new(),
    };
    for sym in f.symbols() {
        let name = sym.name().unwrap_or_default().to_string();
        if name.starts_with("label_") {
            assert!(sym.is_local(), "{name} is local");
            s.label_at.insert(sym.address(), name.clone());
            s.label.insert(name, sym.address());
        } else if sym.kind() == object::SymbolKind::Text {
            s.kernels.insert(name, (sym.address(), sym.size()));
        }
    }
    let text = f.section_by_name(".text").expect(".text");
    s.text_addr = text.address();
    s.text_offset = text.file_range().expect("file range").0;
    s.text = text.data().expect("text").to_vec();
    s
}

/// Writes `DIR/mutated.co`, a copy of `out` whose 32-bit literal in the second dword of the
/// instruction at `add` (holding `lit`) is moved by `delta` bytes, and returns its path.
pub fn with_moved_literal(dir: &Path, out: &Path, (add, lit): (u64, u32), delta: i32) -> PathBuf {
    let s = syms(out);
    let at = (s.text_offset + add + 4 - s.text_addr) as usize;
    let mut bytes = std::fs::read(out).expect("read output");
    assert_eq!(
        bytes[at..at + 4],
        lit.to_le_bytes(),
        "the literal's bytes at {add:#x}"
    );
    bytes[at..at + 4].copy_from_slice(&lit.wrapping_add(delta as u32).to_le_bytes());
    let p = dir.join("mutated.co");
    std::fs::write(&p, bytes).expect("write");
    p
}

/// [`with_moved_literal`], then asserts that `sqtt-patch verify ORIG mutated.co` rejects it
/// (exit 1) with a branch finding naming the address builder.
pub fn assert_literal_move_rejected(
    dir: &Path,
    orig: &Path,
    out: &Path,
    literal: (u64, u32),
    delta: i32,
    ctx: &str,
) {
    let (code, text) = verify(orig, &with_moved_literal(dir, out, literal, delta));
    assert_eq!(code, 1, "{ctx} {delta:+}: want a rejection:\n{text}");
    assert!(
        text.contains("[branch]") && text.contains("address builder to orig"),
        "{ctx} {delta:+}: want a branch finding naming the address builder:\n{text}"
    );
}

/// One run of the `sqtt-interp` model wave over the code of an object between two labels.
pub struct Stretch {
    /// The labels jumped to, in order (jumps to other addresses, e.g. the rewrite's own loops,
    /// are left out).
    pub taken: Vec<String>,
    /// The label where execution left the stretch.
    pub exit: String,
    pub wave: sqtt_interp::Wave,
    /// The SQTT shaderdata the stretch sent.
    pub shaderdata: Vec<u32>,
}

/// Runs the code of `s` from label `from` up to label `to` on a fresh `target` wave of `lanes`
/// lanes with s8 = `n`, s9 = 0 and s34..s36 = 0xdeadbeef (the long-branch registers hold no
/// address on entry); panics, naming `ctx`, when the interpreter stops or execution leaves
/// at an address without a label.
pub fn run_stretch(
    s: &Syms,
    (target, lanes): (&str, u32),
    (from, to): (&str, &str),
    n: u32,
    ctx: &str,
) -> Stretch {
    let isa = amdgpu_isa::Target::from_name(target).expect("target");
    let (a, b) = (s.label[from], s.label[to]);
    let bytes = &s.text[(a - s.text_addr) as usize..(b - s.text_addr) as usize];
    let mut w = sqtt_interp::Wave::new(isa, lanes).expect("wave");
    w.sgpr[8] = n;
    w.sgpr[9] = 0;
    for r in 34..=36 {
        w.sgpr[r] = 0xdead_beef;
    }
    let mut code = sqtt_interp::Code::new(bytes, a);
    let mut jumps = Vec::new();
    let r = sqtt_interp::run_code_jumps(&mut w, &mut code, 10_000, &mut jumps)
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let taken = jumps
        .iter()
        .filter_map(|j| s.label_at.get(&j.to).cloned())
        .collect();
    let exit = s
        .label_at
        .get(&r.exit_pc)
        .cloned()
        .unwrap_or_else(|| panic!("{ctx}: left at {:#x}, which is no label", r.exit_pc));
    Stretch {
        taken,
        exit,
        wave: w,
        shaderdata: r.shaderdata,
    }
}
