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

use amdgpu_isa::{decode, testing, Family, Target};
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

/// Verdict of llvm-mc on one line (our bytes followed by the line's sentinel `s_nop <i>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// LLVM decoded exactly one instruction of our length.
    Agree,
    /// LLVM rejects the word at its first byte (invalid operands): not a length disagreement.
    LlvmRejects,
    /// llvm-mc crashed on this line (isolated by bisection).
    Crash,
    /// LLVM decoded a different length.
    LengthDiffers,
    /// gfx12: a VIMAGE word (dword0 bits 31:23 = 0x1a7) whose image operands LLVM rejects, which
    /// LLVM 22 then decodes with its VOP3P `v_fma_mix*` table instead (64-bit). Real image
    /// instructions never take this path; counted, not failed.
    LlvmImageFallback,
}

fn sentinel(i: usize) -> [u8; 4] {
    [(i & 0xff) as u8, ((i >> 8) & 0xff) as u8, 0x80, 0xbf]
}

fn parse_encoding(l: &str) -> Option<Vec<u8>> {
    let e = l
        .split("encoding: [")
        .nth(1)?
        .trim_end()
        .trim_end_matches(']');
    e.split(',')
        .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).ok())
        .collect()
}

/// Runs one llvm-mc process over `lines` (byte strings); `None` if it crashed.
fn run_batch(mcpu: &str, lines: &[Vec<u8>]) -> Option<Vec<Verdict>> {
    let mut child = Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args([
            "-arch=amdgcn",
            &format!("-mcpu={mcpu}"),
            "--disassemble",
            "-show-encoding",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc");
    let input: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            l.iter()
                .chain(&sentinel(i))
                .map(|b| format!("{b:#04x}"))
                .collect::<Vec<_>>()
                .join(" ")
                + "\n"
        })
        .collect();
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("llvm-mc output");
    writer.join().expect("writer thread").expect("write stdin");
    out.status.code()?;
    // First warning column per line (1-based line numbers).
    let mut warn_col: Vec<Option<usize>> = vec![None; lines.len()];
    for l in String::from_utf8_lossy(&out.stderr).lines() {
        let mut p = l.split(':');
        if p.next() != Some("<stdin>") {
            continue;
        }
        let (Some(Ok(n)), Some(Ok(c))) = (
            p.next().map(str::parse::<usize>),
            p.next().map(str::parse::<usize>),
        ) else {
            continue;
        };
        if let Some(w) = warn_col.get_mut(n.wrapping_sub(1)) {
            w.get_or_insert(c);
        }
    }
    let encs: Vec<Vec<u8>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(parse_encoding)
        .collect();
    let mut pos = 0;
    let mut verdicts = Vec::with_capacity(lines.len());
    for (i, _) in lines.iter().enumerate() {
        let s = sentinel(i);
        let found = encs[pos..].iter().take(12).position(|e| e[..] == s[..]);
        let v = match (warn_col[i], found) {
            (Some(1), _) => Verdict::LlvmRejects,
            (Some(_), _) => Verdict::LengthDiffers,
            (None, Some(1)) => Verdict::Agree,
            (None, _) => Verdict::LengthDiffers,
        };
        if let Some(f) = found {
            pos += f + 1;
        }
        verdicts.push(v);
    }
    Some(verdicts)
}

/// Verdicts for `lines`, bisecting batches that crash llvm-mc.
fn check(mcpu: &str, lines: &[Vec<u8>]) -> Vec<Verdict> {
    match run_batch(mcpu, lines) {
        Some(v) => v,
        None if lines.len() == 1 => vec![Verdict::Crash],
        None => {
            let (a, b) = lines.split_at(lines.len() / 2);
            [check(mcpu, a), check(mcpu, b)].concat()
        }
    }
}

#[test]
fn random_words_lengths_agree_with_llvm_mc() {
    if common::no_llvm() {
        return;
    }
    let per_target: usize = std::env::var("AMDGPU_ISA_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(2_500, |n: usize| n / 8);
    let mut failures = Vec::new();
    for (k, name) in [
        "gfx900", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1200", "gfx1201", "gfx1250",
    ]
    .iter()
    .enumerate()
    {
        let t = Target::from_name(name).expect("target");
        let space = testing::opcode_words(t);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (k as u64 + 1));
        let (mut lines, mut rejected) = (Vec::new(), 0usize);
        while lines.len() < per_target {
            let (w, m) = space[rng.next() as usize % space.len()];
            let mut words = [
                w | (rng.next() & !m),
                rng.next(),
                rng.next(),
                rng.next(),
                rng.next(),
                rng.next(),
            ];
            match rng.next() % 8 {
                0 => {
                    words[0] = (words[0] & !0x1ff)
                        | [255, 250, 249, 233, 234, 254][rng.next() as usize % 6]
                }
                1 => words[1] = (words[1] & !0x1ff) | [255, 250, 233, 254][rng.next() as usize % 4],
                2 => words[0] = (words[0] & !0xff) | 255,
                _ => {}
            }
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let Ok(i) = decode(&bytes, t) else {
                rejected += 1;
                continue;
            };
            lines.push(i.bytes().to_vec());
        }
        let mut verdicts = Vec::new();
        for chunk in lines.chunks(500) {
            verdicts.extend(check(name, chunk));
        }
        // Output alignment after a rejected line is ambiguous in a batch: re-check every
        // non-agreeing line alone.
        for (l, v) in lines.iter().zip(verdicts.iter_mut()) {
            if *v == Verdict::LengthDiffers {
                *v = check(name, std::slice::from_ref(l))[0];
            }
            let w0 = u32::from_le_bytes([l[0], l[1], l[2], l[3]]);
            if *v == Verdict::LengthDiffers
                && t.family() == Family::Gfx12
                && w0 & 0xff80_0000 == 0xd380_0000
            {
                *v = Verdict::LlvmImageFallback;
            }
        }
        let count = |v: Verdict| verdicts.iter().filter(|x| **x == v).count();
        let bad: Vec<String> = lines
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| **v == Verdict::LengthDiffers)
            .map(|(l, _)| format!("{l:02x?}"))
            .collect();
        eprintln!(
            "{name}: {} decoded by us ({rejected} rejected by us); llvm-mc: {} same length, {} rejects operands, {} crashes, {} VIMAGE->VOP3P fallbacks, {} length differs",
            lines.len(),
            count(Verdict::Agree),
            count(Verdict::LlvmRejects),
            count(Verdict::Crash),
            count(Verdict::LlvmImageFallback),
            bad.len()
        );
        for b in bad.iter().take(8) {
            eprintln!("  {name} length differs: {b}");
        }
        failures.extend(bad.into_iter().map(|b| format!("{name}: {b}")));
    }
    assert!(
        failures.is_empty(),
        "{} words decode to a different length in llvm-mc",
        failures.len()
    );
}
