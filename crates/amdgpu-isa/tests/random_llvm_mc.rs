//! Random-encoding differential test against `llvm-mc-22 --disassemble`, per family.
//!
//! Words are generated from each target's opcode space (random operand bits, biased towards
//! literal/DPP/SDWA source values). For every word OUR decoder accepts, llvm-mc must decode
//! exactly one instruction of the same length: each line holds our `len()` bytes followed by a
//! sentinel `s_nop 0`, and LLVM must print the instruction then the sentinel. Batches run in
//! separate processes; a crashing or disagreeing batch is bisected to single lines (llvm-mc 22
//! segfaults on some invalid gfx9/gfx10 words; such words are counted, not failed).
//!
//! Samples per target: 2,500 by default (20k in total); set `AMDGPU_ISA_RANDOM=200000` for more.
mod common;

use amdgpu_isa::{decode, testing, Target};
use std::io::Write;
use std::process::{Command, Stdio};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

enum Outcome {
    /// LLVM decoded every line as one instruction of our length.
    Agree,
    /// llvm-mc crashed (signal).
    Crash,
    /// Some line disagreed or was rejected.
    Disagree,
}

fn run_batch(mcpu: &str, lines: &[String]) -> Outcome {
    let mut child = Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args(["-arch=amdgcn", &format!("-mcpu={mcpu}"), "--disassemble", "-show-encoding"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc");
    let input = lines.join("\n");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("llvm-mc output");
    writer.join().expect("writer thread").expect("write stdin");
    if out.status.code().is_none() {
        return Outcome::Crash;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("warning") || stderr.contains("error") {
        return Outcome::Disagree;
    }
    let encs: Vec<usize> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split("encoding: [").nth(1)).map(|e| e.split(',').count()).collect();
    let texts: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("encoding: [")).map(|l| l.trim().to_string()).collect();
    if encs.len() != 2 * lines.len() || texts.iter().skip(1).step_by(2).any(|t| !t.starts_with("s_nop 0")) {
        return Outcome::Disagree;
    }
    Outcome::Agree
}

/// Returns (agreeing lines, crashing lines, disagreeing lines with their text).
fn check(mcpu: &str, lines: &[String]) -> (usize, usize, Vec<String>) {
    match run_batch(mcpu, lines) {
        Outcome::Agree => (lines.len(), 0, Vec::new()),
        Outcome::Crash if lines.len() == 1 => (0, 1, Vec::new()),
        Outcome::Disagree if lines.len() == 1 => (0, 0, lines.to_vec()),
        _ => {
            let (a, b) = lines.split_at(lines.len() / 2);
            let (x, y) = (check(mcpu, a), check(mcpu, b));
            (x.0 + y.0, x.1 + y.1, [x.2, y.2].concat())
        }
    }
}

#[test]
fn random_words_lengths_agree_with_llvm_mc() {
    if common::no_llvm() {
        return;
    }
    let per_target: usize = std::env::var("AMDGPU_ISA_RANDOM").ok().and_then(|v| v.parse().ok()).map_or(2_500, |n: usize| n / 8);
    let mut failures = Vec::new();
    for (k, name) in ["gfx900", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1200", "gfx1201", "gfx1250"].iter().enumerate() {
        let t = Target::from_name(name).expect("target");
        let space = testing::opcode_words(t);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (k as u64 + 1));
        let (mut lines, mut rejected) = (Vec::new(), 0usize);
        while lines.len() < per_target {
            let (w, m) = space[rng.next() as usize % space.len()];
            let mut words = [w | (rng.next() & !m), rng.next(), rng.next(), rng.next(), rng.next(), rng.next()];
            match rng.next() % 8 {
                0 => words[0] = (words[0] & !0x1ff) | [255, 250, 249, 233, 234, 254][rng.next() as usize % 6],
                1 => words[1] = (words[1] & !0x1ff) | [255, 250, 233, 254][rng.next() as usize % 4],
                2 => words[0] = (words[0] & !0xff) | 255,
                _ => {}
            }
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let Ok(i) = decode(&bytes, t) else {
                rejected += 1;
                continue;
            };
            let mut line: Vec<String> = i.bytes().iter().map(|b| format!("{b:#04x}")).collect();
            line.extend(["0x00", "0x00", "0x80", "0xbf"].map(String::from));
            lines.push(line.join(" "));
        }
        let mut agree = 0;
        let mut crashes = 0;
        let mut bad = Vec::new();
        for chunk in lines.chunks(500) {
            let (a, c, b) = check(name, chunk);
            agree += a;
            crashes += c;
            bad.extend(b);
        }
        eprintln!("{name}: {} decoded by us ({rejected} rejected by us), {agree} agree with llvm-mc, {crashes} crash llvm-mc, {} disagree", lines.len(), bad.len());
        for b in bad.iter().take(5) {
            eprintln!("  {name} disagree: {b}");
        }
        failures.extend(bad.into_iter().map(|b| format!("{name}: {b}")));
    }
    assert!(failures.is_empty(), "{} lines disagree with llvm-mc", failures.len());
}
