//! Random-encoding differential test against `llvm-mc-22 --disassemble`, per family.
//!
//! Families and processors: gfx9 (gfx900, gfx942, gfx950), gfx10 (gfx1030), gfx11 (gfx1100),
//! gfx12 (gfx1201), gfx1250. Words are generated format-aware from each target's encoding space
//! ([`testing::opcode_words`]: a format's fixed bits and one opcode, every other bit random,
//! source operands biased towards literal/DPP/SDWA values; one in 16 a two-part VOP3PX2
//! encoding from [`testing::pair_words`]), with a fixed seed per processor.
//! Every word OUR decoder accepts is given to llvm-mc as one line: our `len()` bytes followed
//! by a sentinel `s_nop <i>`; LLVM must print exactly one instruction and then the sentinel.
//!
//! Asserts per family, over the instructions LLVM accepts (no warning, sentinel right after):
//! at least `AMDGPU_ISA_RANDOM` (default 200,000) of them; 100 % length agreement (a word LLVM
//! decodes to another length fails the test); 100 % byte-identical re-encoding
//! ([`Instruction::bytes`] equals the input); text (our `Display` vs LLVM's) agreement at a
//! measured floor, with a table of the disagreements by category.
//!
//! Crash isolation: llvm-mc runs as a subprocess per batch of 4,000 lines, two at a time. A
//! batch that crashes or hangs (60 s) is split 16 ways, recursively, down to single lines; those words are
//! excluded and listed (LLVM 22 segfaults on some invalid words).
mod common;

use amdgpu_isa::{decode, testing, Family, Instruction, Target};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

/// Text agreement floors per family, in percent: the measured value at the default 200,000 words
/// with LLVM 22.1 rounded down (docs/isa.md); the goal is 99 %.
const TEXT_FLOOR: [(&str, f64); 5] = [
    // Issue 29 (more opcodes in the sampled space): gfx9 99.965 % (7 `buffer_store_lds_dword`
    // print ` lds` after `glc slc`, LLVM before), gfx10 99.955 % (the VOP3 `v_interp_*` class).
    ("gfx9", 99.96),
    ("gfx10", 99.95),
    ("gfx11", 99.99),
    ("gfx12", 99.99),
    // Measured 99.650 % at 20k words after the VOP3PX2 work, before the WMMA reuse-flag fix.
    ("gfx1250", 99.5),
];
const BATCH: usize = 4_000;

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
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    /// LLVM decoded exactly one instruction of our length; its text.
    Agree(String),
    /// Like `Agree`, but LLVM's text flags an operand as invalid (`/*Invalid register, operand
    /// has 'VReg_64_Align2' register class*/`): an encoding no compiler emits. Counted apart,
    /// not part of the text comparison.
    LlvmFlagsInvalid,
    /// LLVM rejects the word at its first byte (invalid operands): not a length disagreement.
    LlvmRejects,
    /// llvm-mc crashed or hung on this line (isolated by bisection).
    Crash,
    /// LLVM decoded a different length. Exception, counted and not failed: gfx12 VIMAGE words
    /// (dword0 bits 31:23 = 0x1a7) whose image operands LLVM rejects, which LLVM 22 then
    /// decodes with its VOP3P `v_fma_mix*` table instead (64-bit); real image instructions
    /// never take this path.
    LengthDiffers,
}

fn sentinel(i: usize) -> [u8; 4] {
    [(i & 0xff) as u8, ((i >> 8) & 0xff) as u8, 0x80, 0xbf]
}

/// `(text, encoding bytes)` of an llvm-mc output line.
fn parse_line(l: &str) -> Option<(String, Vec<u8>)> {
    let (text, e) = l.split_once("; encoding: [")?;
    let e = e.trim_end().trim_end_matches(']');
    let bytes = e
        .split(',')
        .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((text.trim().to_string(), bytes))
}

/// Runs one llvm-mc process over `lines`; `None` if it crashed or hung.
fn run_batch(mcpu: &str, lines: &[Vec<u8>]) -> Option<Vec<Verdict>> {
    let child = Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args([
            "-arch=amdgcn",
            &format!("-mcpu={mcpu}"),
            "--disassemble",
            "-show-encoding",
        ])
        // A crash must not spend seconds symbolizing its stack trace.
        .env("LLVM_DISABLE_SYMBOLIZATION", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc");
    let mut input = String::with_capacity(lines.len() * 64);
    for (i, l) in lines.iter().enumerate() {
        for b in l.iter().chain(&sentinel(i)) {
            input.push_str(&format!("{b:#04x} "));
        }
        input.push('\n');
    }
    let (out, err) = common::feed_with_deadline(child, input)?;
    // First warning column per line (1-based line numbers).
    let mut warn_col: Vec<Option<usize>> = vec![None; lines.len()];
    for l in String::from_utf8_lossy(&err).lines() {
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
    let insts: Vec<(String, Vec<u8>)> = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(parse_line)
        .collect();
    let mut pos = 0;
    // llvm-mc decodes its input as one byte stream: after a word it rejects, it resumes inside
    // that word and may swallow the sentinel and the next line into one bogus instruction. A
    // line is only compared when the previous line's sentinel was found (the stream is in step).
    let mut in_step = true;
    let mut verdicts = Vec::with_capacity(lines.len());
    for (i, warn) in warn_col.iter().enumerate() {
        let s = sentinel(i);
        let found = insts[pos..].iter().take(12).position(|e| e.1[..] == s[..]);
        let v = match (*warn, found) {
            (Some(1), _) => Verdict::LlvmRejects,
            _ if !in_step => Verdict::LlvmRejects,
            (Some(_), _) => Verdict::LengthDiffers,
            // `-show-encoding` prints LLVM's re-encoding of its MCInst (ignored bits cleared),
            // so it is not compared: one instruction between the sentinels means LLVM consumed
            // exactly our bytes.
            (None, Some(1)) => Verdict::Agree(insts[pos].0.clone()),
            (None, _) => Verdict::LengthDiffers,
        };
        let v = match v {
            Verdict::Agree(t) if t.contains("/*Invalid") => Verdict::LlvmFlagsInvalid,
            v => v,
        };
        if let Some(f) = found {
            pos += f + 1;
        }
        in_step = found.is_some();
        verdicts.push(v);
    }
    Some(verdicts)
}

/// Does llvm-mc crash (die by a signal) on this word alone?
fn crashes_alone(mcpu: &str, line: &[u8]) -> bool {
    let mut child = Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args(["-arch=amdgcn", &format!("-mcpu={mcpu}"), "--disassemble"])
        .env("LLVM_DISABLE_SYMBOLIZATION", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run llvm-mc");
    let text: String = line.iter().map(|b| format!("{b:#04x} ")).collect();
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(text.as_bytes());
    }
    child.wait().map(|s| s.code().is_none()).unwrap_or(false)
}

/// Verdicts for `lines`, bisecting batches that crash or hang llvm-mc.
fn check(mcpu: &str, lines: &[Vec<u8>]) -> Vec<Verdict> {
    match run_batch(mcpu, lines) {
        Some(v) => v,
        None if lines.len() == 1 => vec![Verdict::Crash],
        // Split a crashing batch 16 ways: a few crashing words cost a few small re-runs.
        None => lines
            .chunks(lines.len().div_ceil(16))
            .flat_map(|c| check(mcpu, c))
            .collect(),
    }
}

/// Verdicts for many lines: batches of [`BATCH`] on two llvm-mc processes at a time.
fn check_all(mcpu: &str, lines: &[Vec<u8>]) -> Vec<Verdict> {
    let chunks: Vec<&[Vec<u8>]> = lines.chunks(BATCH).collect();
    let results: Mutex<Vec<Option<Vec<Verdict>>>> = Mutex::new(vec![None; chunks.len()]);
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = {
                    let mut n = next.lock().expect("lock");
                    *n += 1;
                    *n - 1
                };
                let Some(c) = chunks.get(k) else { break };
                let v = check(mcpu, c);
                results.lock().expect("lock")[k] = Some(v);
            });
        }
    });
    let mut verdicts: Vec<Verdict> = results
        .into_inner()
        .expect("lock")
        .into_iter()
        .flat_map(|v| v.expect("every batch checked"))
        .collect();
    // Output alignment after a rejected line is ambiguous in a batch: re-check every
    // non-agreeing line alone.
    let redo: Vec<usize> = (0..lines.len())
        .filter(|&i| verdicts[i] == Verdict::LengthDiffers)
        .collect();
    if !redo.is_empty() {
        let again: Vec<Vec<u8>> = redo.iter().map(|&i| lines[i].clone()).collect();
        // One line per batch is too slow for many lines; a batch of lines that are each
        // followed by their own sentinel is exact as long as LLVM accepts the line, so only
        // the remaining disagreements are re-run one by one.
        let v = check(mcpu, &again);
        for (&i, v) in redo.iter().zip(v) {
            verdicts[i] = if v == Verdict::LengthDiffers {
                match check(mcpu, std::slice::from_ref(&lines[i])).remove(0) {
                    // A word that crashes llvm-mc when decoded alone is an LLVM crash, whatever
                    // it printed with the sentinel after it.
                    Verdict::LengthDiffers if crashes_alone(mcpu, &lines[i]) => Verdict::Crash,
                    v => v,
                }
            } else {
                v
            };
        }
    }
    verdicts
}

/// A short category of a text disagreement: the format and the first differing token of
/// LLVM's text with digits removed (`VOP3 clamp`, `VOP1 row_shr:`).
fn category(i: &Instruction, ours: &str, llvm: &str) -> String {
    let a: Vec<&str> = ours.split([' ', ',']).filter(|s| !s.is_empty()).collect();
    let b: Vec<&str> = llvm.split([' ', ',']).filter(|s| !s.is_empty()).collect();
    let k = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tok = match (a.get(k), b.get(k)) {
        (_, Some(t)) if k == 0 => format!("mnemonic {t}"),
        (_, Some(t)) => t.to_string(),
        (Some(t), None) => format!("extra {t}"),
        (None, None) => "spacing".to_string(),
    };
    let tok: String = tok
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(24)
        .collect();
    format!("{:?} {tok}", i.format())
}

struct FamilyResult {
    accepted: usize,
    flagged_invalid: usize,
    text_ok: usize,
    length_bad: Vec<String>,
    crashes: Vec<String>,
    categories: BTreeMap<String, (usize, String)>,
    /// `AMDGPU_ISA_RANDOM_DUMP=<file>`: every text disagreement, one TSV line each (cpu,
    /// category, bytes, ours, LLVM's).
    dump: Option<std::fs::File>,
}

fn run_target(
    name: &str,
    seed: u64,
    want: usize,
    res: &mut FamilyResult,
) -> (usize, usize, usize, usize) {
    let t = Target::from_name(name).expect("target");
    let space = testing::opcode_words(t);
    let pairs = testing::pair_words(t);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
    let (mut generated, mut ours_rejected, mut llvm_rejected, mut fallbacks) = (0, 0, 0, 0);
    let mut accepted = 0usize;
    while accepted < want {
        // Ask for what is missing plus a margin for LLVM rejections.
        let n = ((want - accepted) * 5 / 4).max(1_000);
        let mut lines = Vec::with_capacity(n);
        let mut insts = Vec::with_capacity(n);
        while lines.len() < n {
            let (w, m) = space[rng.next() as usize % space.len()];
            let mut words = [
                w | (rng.next() & !m),
                rng.next(),
                rng.next(),
                rng.next(),
                rng.next(),
                rng.next(),
            ];
            // Two-part (VOP3PX2) encodings: the fixed bits of a pair, all others random.
            if !pairs.is_empty() && rng.next().is_multiple_of(16) {
                let (m, v) = pairs[rng.next() as usize % pairs.len()];
                for k in 0..4 {
                    words[k] = (words[k] & !m[k]) | v[k];
                }
                // Mostly vector matrix sources A/B (scalar ones make LLVM reject the pair).
                if !rng.next().is_multiple_of(4) {
                    words[3] |= (1 << 8) | (1 << 17);
                }
            }
            match rng.next() % 8 {
                0 => {
                    words[0] = (words[0] & !0x1ff)
                        | [255, 250, 249, 233, 234, 254][rng.next() as usize % 6]
                }
                // VOP3 sources in dword 1: literal (not before gfx10), DPP, 64-bit literal.
                1 if t.family() != Family::Gfx9 => {
                    words[1] = (words[1] & !0x1ff) | [255, 250, 233, 254][rng.next() as usize % 4]
                }
                2 => words[0] = (words[0] & !0xff) | 255,
                _ => {}
            }
            generated += 1;
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let Ok(i) = decode(&bytes, t) else {
                ours_rejected += 1;
                continue;
            };
            assert_eq!(
                i.bytes(),
                &bytes[..i.len()],
                "{name}: re-encode differs from the input"
            );
            lines.push(i.bytes().to_vec());
            insts.push(i);
        }
        let verdicts = check_all(name, &lines);
        for ((l, i), v) in lines.iter().zip(&insts).zip(verdicts) {
            let w0 = u32::from_le_bytes([l[0], l[1], l[2], l[3]]);
            match v {
                Verdict::LlvmFlagsInvalid => res.flagged_invalid += 1,
                Verdict::Agree(text) => {
                    if accepted >= want {
                        continue;
                    }
                    accepted += 1;
                    let ours = i.to_string();
                    if ours == text {
                        res.text_ok += 1;
                    } else {
                        let e = res
                            .categories
                            .entry(category(i, &ours, &text))
                            .or_insert((0, String::new()));
                        e.0 += 1;
                        if let Some(d) = res.dump.as_mut() {
                            let cat = category(i, &ours, &text);
                            let _ = writeln!(d, "{name}\t{cat}\t{l:02x?}\t{ours}\t{text}");
                        }
                        if e.1.is_empty() {
                            e.1 = format!("{name} {l:02x?}: ours `{ours}` llvm `{text}`");
                        }
                    }
                }
                Verdict::LlvmRejects => llvm_rejected += 1,
                Verdict::Crash => res.crashes.push(format!("{name} {l:02x?}")),
                Verdict::LengthDiffers
                    if t.family() == Family::Gfx12 && w0 & 0xff80_0000 == 0xd380_0000 =>
                {
                    fallbacks += 1
                }
                // gfx1250 VOP3PX2 pairs (scale load + WMMA, 16 bytes) whose operand
                // combination LLVM 22 rejects as a pair, decoding the 8-byte prefix alone: a
                // rule our probed pair masks (isa-tables/pairs.tsv) do not capture yet (docs/isa.md).
                Verdict::LengthDiffers if t.family() == Family::Gfx1250 && i.len() == 16 => {
                    fallbacks += 1
                }
                Verdict::LengthDiffers => res
                    .length_bad
                    .push(format!("{name} {l:02x?} ({})", i.mnemonic())),
            }
        }
    }
    res.accepted += accepted;
    (generated, ours_rejected, llvm_rejected, fallbacks)
}

#[test]
fn random_words_agree_with_llvm_mc() {
    if common::no_llvm() {
        return;
    }
    let per_family: usize = std::env::var("AMDGPU_ISA_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let families: [(&str, &[&str]); 5] = [
        // gfx942 and gfx950 get a fifth each: llvm-mc 22 crashes on about 1 in 250 random
        // gfx942 VOP3 words, and isolating each crash costs several llvm-mc runs. gfx950 has
        // the two-part VOP3PX2 MFMAs.
        ("gfx9", &["gfx900", "gfx900", "gfx900", "gfx942", "gfx950"]),
        ("gfx10", &["gfx1030"]),
        ("gfx11", &["gfx1100"]),
        ("gfx12", &["gfx1201"]),
        ("gfx1250", &["gfx1250"]),
    ];
    // `AMDGPU_ISA_RANDOM_FAMILIES=gfx10,gfx11` restricts the run (the full set is the default).
    let only: Option<Vec<String>> = std::env::var("AMDGPU_ISA_RANDOM_FAMILIES")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let dump_path = std::env::var("AMDGPU_ISA_RANDOM_DUMP").ok();
    let mut failures = Vec::new();
    for (fam, cpus) in families {
        if only.as_ref().is_some_and(|o| !o.iter().any(|f| f == fam)) {
            continue;
        }
        let start = Instant::now();
        let mut res = FamilyResult {
            accepted: 0,
            flagged_invalid: 0,
            text_ok: 0,
            length_bad: Vec::new(),
            crashes: Vec::new(),
            categories: BTreeMap::new(),
            dump: dump_path.as_ref().map(|p| {
                let p = format!("{p}.{fam}.tsv");
                std::fs::File::create(&p).expect("create the disagreement dump")
            }),
        };
        for (k, cpu) in cpus.iter().enumerate() {
            let want = per_family / cpus.len() + usize::from(k < per_family % cpus.len());
            let seed = cpu
                .bytes()
                .fold(k as u64, |h, b| h.wrapping_mul(31) + u64::from(b));
            let (g, ours_rej, llvm_rej, fb) = run_target(cpu, seed, want, &mut res);
            eprintln!(
                "{cpu}: {g} words generated, {ours_rej} rejected by us, {llvm_rej} of ours rejected by LLVM, {fb} VIMAGE->VOP3P fallbacks"
            );
        }
        let pct = 100.0 * res.text_ok as f64 / res.accepted.max(1) as f64;
        eprintln!(
            "{fam}: {} LLVM-accepted instructions in {:.1} s: length agreement {} differ, re-encode 100%, text {}/{} = {pct:.3}%, {} llvm-mc crashes excluded, {} flagged invalid by LLVM",
            res.accepted,
            start.elapsed().as_secs_f64(),
            res.length_bad.len(),
            res.text_ok,
            res.accepted,
            res.crashes.len(),
            res.flagged_invalid
        );
        for c in res.crashes.iter().take(10) {
            eprintln!("  {fam} llvm-mc crash (excluded): {c}");
        }
        let mut cats: Vec<_> = res.categories.into_iter().collect();
        cats.sort_by_key(|c| std::cmp::Reverse(c.1 .0));
        for (c, (n, ex)) in cats.iter().take(40) {
            eprintln!("  {fam} {n:6} {c:32} {ex}");
        }
        for b in res.length_bad.iter().take(8) {
            eprintln!("  {fam} length differs: {b}");
        }
        if !res.length_bad.is_empty() {
            failures.push(format!(
                "{fam}: {} words decode to a different length in llvm-mc",
                res.length_bad.len()
            ));
        }
        if res.accepted < per_family {
            failures.push(format!("{fam}: only {} accepted", res.accepted));
        }
        let floor = TEXT_FLOOR.iter().find(|f| f.0 == fam).map_or(99.0, |f| f.1);
        if pct < floor {
            failures.push(format!("{fam}: text agreement {pct:.3}% < {floor}%"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
