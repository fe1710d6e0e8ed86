//! Shared test support: target/wave-size matrix, LLVM 22 oracles (`llvm-mc-22` assembler and
//! disassembler), a deterministic PRNG and snippet assembly from `amdgpu_isa::build`.
//! LLVM-dependent helpers fail when `llvm-mc-22` is missing unless `SQTT_NO_LLVM=1` is set, in
//! which case they return `None` and the caller skips only the oracle part.
#![allow(dead_code)] // each test binary uses a different subset of these helpers

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use amdgpu_isa::{decode_all, Instruction, Target};

/// Every family, with the wave sizes the brief asks for: gfx9 wave64, gfx10/11/12 both, gfx1250
/// wave32.
pub const CONFIGS: &[(&str, u32)] = &[
    ("gfx900", 64),
    ("gfx942", 64),
    ("gfx1030", 32),
    ("gfx1030", 64),
    ("gfx1100", 32),
    ("gfx1100", 64),
    ("gfx1200", 32),
    ("gfx1200", 64),
    ("gfx1250", 32),
];

pub fn target(name: &str) -> Target {
    Target::from_name(name).unwrap_or_else(|| panic!("amdgpu-isa does not know {name}"))
}

/// Path of `llvm-mc-22`, or None when it is missing and `SQTT_NO_LLVM=1`.
pub fn llvm_mc() -> Option<PathBuf> {
    for p in ["/usr/lib/llvm-22/bin/llvm-mc", "/usr/bin/llvm-mc-22"] {
        let p = PathBuf::from(p);
        if p.exists() {
            return Some(p);
        }
    }
    if let Ok(out) = Command::new("llvm-mc-22").arg("--version").output() {
        if out.status.success() {
            return Some(PathBuf::from("llvm-mc-22"));
        }
    }
    if std::env::var("SQTT_NO_LLVM").as_deref() == Ok("1") {
        return None;
    }
    panic!("llvm-mc-22 (LLVM 22) not found; set SQTT_NO_LLVM=1 to skip the oracle checks");
}

fn mc(args: &[String], input: &str) -> Option<(String, String)> {
    let tool = llvm_mc()?;
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn llvm-mc-22");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write llvm-mc-22 stdin");
    let out = child.wait_with_output().expect("llvm-mc-22 output");
    assert!(
        out.status.success(),
        "llvm-mc-22 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn mc_args(mcpu: &str, wave_size: u32) -> Vec<String> {
    let mut a = vec![
        "-triple=amdgcn-amd-amdhsa".to_string(),
        format!("-mcpu={mcpu}"),
    ];
    if wave_size == 64 && !mcpu.starts_with("gfx9") {
        a.push("-mattr=+wavefrontsize64".to_string());
    }
    a
}

/// Mnemonics `llvm-mc-22 --disassemble` prints for `code`, in order (None: LLVM skipped).
pub fn llvm_mnemonics(mcpu: &str, wave_size: u32, code: &[u8]) -> Option<Vec<String>> {
    let hex: Vec<String> = code.iter().map(|b| format!("{b:#04x}")).collect();
    let mut args = mc_args(mcpu, wave_size);
    args.push("--disassemble".to_string());
    let (out, err) = mc(&args, &hex.join(" "))?;
    assert!(
        !err.contains("invalid instruction encoding"),
        "llvm-mc-22 rejects bytes for {mcpu}: {err}"
    );
    Some(
        out.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('.'))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect(),
    )
}

/// Checks that LLVM 22 disassembles `code` to the same instruction sequence `amdgpu-isa` decodes
/// and that it contains every mnemonic of `expect` (in that order, as a subsequence).
pub fn cross_check(mcpu: &str, wave_size: u32, code: &[u8], expect: &[&str]) {
    let ours: Vec<String> = decode_all(code, target(mcpu))
        .expect("snippet decodes")
        .iter()
        .map(|i| i.mnemonic().to_string())
        .collect();
    let mut it = ours.iter();
    for e in expect {
        assert!(it.any(|m| m == e), "{mcpu}: expected {e} in {ours:?}");
    }
    if let Some(llvm) = llvm_mnemonics(mcpu, wave_size, code) {
        assert_eq!(
            llvm, ours,
            "{mcpu} wave{wave_size}: llvm-mc-22 and amdgpu-isa disagree"
        );
    }
}

/// Assembles `text` with `llvm-mc-22 -show-encoding` (None: LLVM skipped).
pub fn llvm_asm(mcpu: &str, wave_size: u32, text: &str) -> Option<Vec<u8>> {
    let mut args = mc_args(mcpu, wave_size);
    args.push("-show-encoding".to_string());
    let (out, err) = mc(&args, text)?;
    assert!(
        !err.contains("error"),
        "llvm-mc-22 cannot assemble for {mcpu}: {err}\n{text}"
    );
    let mut bytes = Vec::new();
    for l in out.lines() {
        let Some((_, enc)) = l.split_once("encoding: [") else {
            continue;
        };
        let enc = enc.trim_end_matches(']');
        for b in enc.split(',') {
            let b = b.trim().trim_start_matches("0x");
            bytes.push(u8::from_str_radix(b, 16).expect("hex byte"));
        }
    }
    Some(bytes)
}

/// Concatenates the encodings of `insts`.
pub fn code_of(insts: &[Instruction]) -> Vec<u8> {
    insts.iter().flat_map(|i| i.bytes().to_vec()).collect()
}

/// Sum of instruction lengths in dwords (for branch displacements).
pub fn dwords(insts: &[Instruction]) -> i16 {
    (insts.iter().map(|i| i.len()).sum::<usize>() / 4) as i16
}

/// xorshift64* PRNG (deterministic, no dependency).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}
