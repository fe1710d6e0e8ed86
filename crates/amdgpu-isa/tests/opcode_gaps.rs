//! Opcode gaps against `llvm-mc-22 --disassemble`: words LLVM decodes and our decoder refuses.
//!
//! For every processor of `isa-tables/targets.tsv` that LLVM 22 knows (gfx940/gfx941 decode
//! with the gfx942 table, which is covered), in both 16-bit modes from gfx11 on, every
//! encoding format of its family (`isa-tables/formats.tsv`) and EVERY value of the format's
//! opcode field (also the values our tables lack), probe words are built: the format's fixed
//! bits and the opcode with all other bits zero, with the generator's neutral field template,
//! and with the template's immediate fields only, each of the three also with every free
//! dword-0 bit (not format, not opcode) set alone; the generator's alternative templates; for image formats and opcode values we do not
//! decode, the three words with every pair of free dword-0 bits set; random fills of the free bits (8
//! for opcode values we do not decode, 2 for the others). Words our decoder accepts are left
//! to `random_llvm_mc` (length and text); every word it refuses goes to llvm-mc, one line each
//! (the word, zero dwords so that LLVM's byte stream is back in step, and a sentinel `s_nop
//! <i>`). A line LLVM decodes from its first byte is a gap.
//!
//! Asserts: every gap is one of [`KNOWN_GAPS`] (format and mnemonic, each with its reason,
//! docs/isa.md "Opcode gaps"): a new gap fails, and so does (in a full run) a listed gap that
//! LLVM no longer decodes or that we now decode. llvm-mc crashes are isolated by bisection and
//! excluded (listed). gfx12 VIMAGE words LLVM decodes as VOP3P `v_fma_mix*` are counted apart.
//! `AMDGPU_ISA_GAPS_TARGETS=gfx90a,gfx1030` restricts the processors (all by default).
mod common;

use amdgpu_isa::{decode, Family, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

/// Gaps LLVM 22 decodes that we still refuse, on any processor: (format, LLVM mnemonic, reason).
/// docs/isa.md "Opcode gaps" lists the same.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[
    (
        "MIMG",
        "image_bvh_intersect_ray",
        "gfx10.3/gfx11 ray intersection: address width depends on a16 (11 or 8 dwords, another \
         LLVM opcode), not one table row per opcode yet; fails closed",
    ),
    (
        "MIMG",
        "image_bvh64_intersect_ray",
        "as image_bvh_intersect_ray (12 or 9 dwords)",
    ),
    (
        "VIMAGE",
        "image_bvh_intersect_ray",
        "gfx12: as gfx11, plus a fifth address operand (dword 1) our VIMAGE fields lack",
    ),
    (
        "VIMAGE",
        "image_bvh64_intersect_ray",
        "as gfx12 image_bvh_intersect_ray",
    ),
    (
        "VIMAGE",
        "image_bvh_dual_intersect_ray",
        "as gfx12 image_bvh_intersect_ray",
    ),
    (
        "VIMAGE",
        "image_bvh8_intersect_ray",
        "as gfx12 image_bvh_intersect_ray",
    ),
];

/// Zero dwords after each probe word (each a 4-byte `v_cndmask_b32` on every family): as long
/// as the longest instruction LLVM could decode from a later dword of the probe (20 bytes), so
/// LLVM is back in step at the next sentinel.
const PAD_DWORDS: usize = 5;
const BATCH: usize = 3_000;

/// A probe: format name, opcode key and the probe dwords.
struct Probe {
    format: String,
    key: u32,
    words: Vec<u32>,
}

fn sentinel(i: usize) -> [u8; 4] {
    [(i & 0xff) as u8, ((i >> 8) & 0xff) as u8, 0x80, 0xbf]
}

/// A bit range `(dword, hi, lo)`.
type Bits = (usize, u32, u32);

/// Bit range from `dw:hi:lo`.
fn bits(s: &str) -> Bits {
    let p: Vec<u32> = s
        .split(':')
        .map(|x| x.parse().expect("bit range"))
        .collect();
    (p[0] as usize, p[1], p[2])
}

fn set(w: &mut [u32], (dw, hi, lo): Bits, v: u32) {
    let m = ((((1u64 << (hi - lo + 1)) - 1) << lo) & 0xffff_ffff) as u32;
    w[dw] = (w[dw] & !m) | ((v << lo) & m);
}

/// One format of `isa-tables/formats.tsv`: name, dwords, mask, value, opcode bit ranges, named
/// fields with their neutral template values, alternative templates.
struct Fmt {
    name: String,
    dwords: usize,
    mask: u32,
    value: u32,
    op: Vec<Bits>,
    /// (name, bits, kind, template value).
    fields: Vec<(String, Bits, String, u32)>,
    alts: Vec<Vec<(String, u32)>>,
}

fn formats(family: &str) -> Vec<Fmt> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../isa-tables/formats.tsv");
    let text = std::fs::read_to_string(path).expect("isa-tables/formats.tsv");
    let mut out = Vec::new();
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let c: Vec<&str> = l.split('\t').collect();
        if c[0] != family {
            continue;
        }
        let (m, v) = c[3].split_once('/').expect("mask/value");
        let num = |x: &str| x.parse::<u32>().expect("number");
        let fields = c[5]
            .split(',')
            .filter(|f| !f.is_empty())
            .map(|f| {
                let (name, rest) = f.split_once('@').expect("field");
                let (range, tpl) = rest.split_once('=').unwrap_or((rest, "0"));
                let (r, kind) = range.rsplit_once(':').expect("kind");
                (name.to_string(), bits(r), kind.to_string(), num(tpl))
            })
            .collect();
        let alts = c
            .get(7)
            .unwrap_or(&"")
            .split('|')
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.split(';')
                    .filter_map(|x| x.split_once('='))
                    .map(|(n, v)| (n.to_string(), num(v)))
                    .collect()
            })
            .collect();
        out.push(Fmt {
            name: c[1].to_string(),
            dwords: num(c[2]) as usize,
            mask: u32::from_str_radix(m, 16).expect("mask"),
            value: u32::from_str_radix(v, 16).expect("value"),
            op: c[4]
                .split(',')
                .filter(|x| !x.is_empty())
                .map(bits)
                .collect(),
            fields,
            alts,
        });
    }
    assert!(!out.is_empty(), "no formats for {family}");
    out
}

/// The probe words of every opcode value of every format of `t`.
fn probes(t: Target) -> Vec<Probe> {
    let mut rng = common::xorshift(0x5eed_0000_0000_0001 ^ u64::from(t.elf_mach().unwrap_or(0)));
    let family = format!("{:?}", t.family()).to_lowercase();
    let mut out = Vec::new();
    let decodes = |w: &[u32]| {
        let mut bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        bytes.extend([0u8; 4 * PAD_DWORDS]);
        decode(&bytes, t).is_ok()
    };
    for f in formats(&family) {
        let nbits: u32 = f.op.iter().map(|r| r.1 - r.2 + 1).sum();
        let mut fixed = vec![0u32; f.dwords];
        fixed[0] = f.mask;
        for &r in &f.op {
            set(&mut fixed, r, u32::MAX);
        }
        let free0: Vec<u32> = (0..32).filter(|b| fixed[0] & (1 << b) == 0).collect();
        for key in 0..(1u32 << nbits) {
            let mut zero = vec![0u32; f.dwords];
            zero[0] = f.value;
            let mut rem = key;
            for &r in f.op.iter().rev() {
                set(&mut zero, r, rem & ((1 << (r.1 - r.2 + 1)) - 1));
                rem >>= r.1 - r.2 + 1;
            }
            // The neutral template, and its immediate fields alone (registers 0, e.g. a BVH
            // opcode needs dmask = 0xf and ssamp = 0).
            let (mut tpl, mut imm) = (zero.clone(), zero.clone());
            for (_, r, kind, v) in &f.fields {
                set(&mut tpl, *r, *v);
                if kind == "imm" {
                    set(&mut imm, *r, *v);
                }
            }
            let mut words = Vec::new();
            // The zero and neutral-template words, each with every free dword-0 bit set alone.
            for base in [&zero, &tpl, &imm] {
                words.push(base.clone());
                for &b in &free0 {
                    let mut w = base.clone();
                    w[0] |= 1 << b;
                    words.push(w);
                }
            }
            // Image formats gate opcodes on two mode bits at once (BVH: `unorm` and `r128`):
            // every pair of free dword-0 bits on the three words, for opcode values we lack.
            let known = decodes(&zero) || decodes(&tpl) || decodes(&imm);
            if !known && matches!(f.name.as_str(), "MIMG" | "VIMAGE" | "VSAMPLE") {
                for base in [&zero, &tpl, &imm] {
                    for (i, &a) in free0.iter().enumerate() {
                        for &b in &free0[i + 1..] {
                            let mut w = base.clone();
                            w[0] |= (1 << a) | (1 << b);
                            words.push(w);
                        }
                    }
                }
            }
            // The generator's alternative templates.
            for a in &f.alts {
                let mut w = tpl.clone();
                for (n, v) in a {
                    if let Some((_, r, _, _)) = f.fields.iter().find(|x| &x.0 == n) {
                        set(&mut w, *r, *v);
                    }
                }
                words.push(w);
            }
            // Random fills of every free bit: more for opcode values we do not decode.
            for _ in 0..if known { 2 } else { 8 } {
                let mut w = zero.clone();
                for (k, x) in w.iter_mut().enumerate() {
                    *x |= rng() & !fixed[k];
                }
                words.push(w);
            }
            out.extend(words.into_iter().map(|words| Probe {
                format: f.name.clone(),
                key,
                words,
            }));
        }
    }
    out
}

/// What llvm-mc made of one line.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    /// Rejected at the line's first byte.
    Rejects,
    /// Decoded from the first byte: LLVM's text of the first instruction.
    Decodes(String),
    /// llvm-mc crashed or hung on this line alone.
    Crash,
}

/// Runs llvm-mc over `lines` (`mattr` = `-mattr` value or empty); `None` if it crashed or hung.
fn run_batch(mcpu: &str, mattr: &str, lines: &[&[u32]]) -> Option<Vec<Verdict>> {
    let mut args = vec![
        "-arch=amdgcn".to_string(),
        format!("-mcpu={mcpu}"),
        "--disassemble".to_string(),
        "-show-encoding".to_string(),
    ];
    if !mattr.is_empty() {
        args.push(format!("-mattr={mattr}"));
    }
    let child = Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args(&args)
        .env("LLVM_DISABLE_SYMBOLIZATION", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc");
    let mut input = String::with_capacity(lines.len() * 200);
    for (i, l) in lines.iter().enumerate() {
        let bytes = l
            .iter()
            .chain(std::iter::repeat_n(&0u32, PAD_DWORDS))
            .flat_map(|w| w.to_le_bytes())
            .chain(sentinel(i));
        for b in bytes {
            input.push_str(&format!("{b:#04x} "));
        }
        input.push('\n');
    }
    let (out, err) = common::feed_with_deadline(child, input)?;
    let mut rejected = vec![false; lines.len()];
    for l in String::from_utf8_lossy(&err).lines() {
        let mut p = l.split(':');
        if p.next() != Some("<stdin>") {
            continue;
        }
        if let (Some(Ok(n)), Some("1")) = (p.next().map(str::parse::<usize>), p.next()) {
            if let Some(r) = rejected.get_mut(n.wrapping_sub(1)) {
                *r = true;
            }
        }
    }
    // (text, encoding) of every printed instruction, in order.
    let insts: Vec<(String, Vec<u8>)> = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| {
            let (text, e) = l.split_once("; encoding: [")?;
            let bytes = e
                .trim_end()
                .trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            Some((text.trim().to_string(), bytes))
        })
        .collect();
    let mut pos = 0;
    let mut verdicts = Vec::with_capacity(lines.len());
    for (i, &rej) in rejected.iter().enumerate() {
        let first = insts.get(pos).map(|x| x.0.clone()).unwrap_or_default();
        let s = sentinel(i);
        // The padding puts LLVM back in step before the sentinel: it must be there.
        let found = insts[pos..].iter().position(|e| e.1[..] == s[..])?;
        pos += found + 1;
        verdicts.push(if rej {
            Verdict::Rejects
        } else {
            Verdict::Decodes(first)
        });
    }
    Some(verdicts)
}

/// Verdicts for `lines`, splitting batches that crash or hang llvm-mc 16 ways, recursively.
fn check(mcpu: &str, mattr: &str, lines: &[&[u32]]) -> Vec<Verdict> {
    match run_batch(mcpu, mattr, lines) {
        Some(v) => v,
        None if lines.len() == 1 => vec![Verdict::Crash],
        None => lines
            .chunks(lines.len().div_ceil(16))
            .flat_map(|c| check(mcpu, mattr, c))
            .collect(),
    }
}

/// One gap: LLVM's text of the first word of this (format, key) it decoded, and the word.
type Gaps = BTreeMap<(String, String, u32), (String, Vec<u32>)>;

/// Probes one processor in one 16-bit mode; returns (probe words, words we refuse, VIMAGE ->
/// VOP3P fallbacks of LLVM, crashes).
fn run_target(t: Target, gaps: &Mutex<Gaps>) -> (usize, usize, usize, Vec<String>) {
    let (mcpu, mattr) = (t.name(), if t.true16() { "+real-true16" } else { "" });
    let mode = format!("{mcpu}{}", if t.true16() { "+t16" } else { "" });
    let all = probes(t);
    let mut seen = BTreeSet::new();
    let refused: Vec<&Probe> = all
        .iter()
        .filter(|p| {
            let mut bytes: Vec<u8> = p.words.iter().flat_map(|w| w.to_le_bytes()).collect();
            bytes.extend([0u8; 4 * PAD_DWORDS]);
            decode(&bytes, t).is_err() && seen.insert(p.words.clone())
        })
        .collect();
    let lines: Vec<&[u32]> = refused.iter().map(|p| &p.words[..]).collect();
    let (mut crashes, mut fallbacks) = (Vec::new(), 0);
    for (chunk, probes) in lines.chunks(BATCH).zip(refused.chunks(BATCH)) {
        for (v, p) in check(mcpu, mattr, chunk).into_iter().zip(probes) {
            match v {
                Verdict::Rejects => {}
                Verdict::Crash => crashes.push(format!("{mode} {:08x?}", p.words)),
                // LLVM 22 quirk (also in random_llvm_mc): a gfx12 VIMAGE word (dword0 bits
                // 31:23 = 0x1a7) whose image operands LLVM rejects is decoded with its VOP3P
                // `v_fma_mix*` table instead, 8 bytes; no compiler emits such a word (the VOP3P
                // encoding of `v_fma_mix*` is 0xcc20..0xcc22).
                Verdict::Decodes(text)
                    if t.family() == Family::Gfx12
                        && p.words[0] & 0xff80_0000 == 0xd380_0000
                        && text.starts_with("v_fma_mix") =>
                {
                    fallbacks += 1
                }
                Verdict::Decodes(text) => {
                    gaps.lock()
                        .expect("lock")
                        .entry((mode.clone(), p.format.clone(), p.key))
                        .or_insert((text, p.words.clone()));
                }
            }
        }
    }
    (all.len(), refused.len(), fallbacks, crashes)
}

#[test]
fn every_opcode_llvm_decodes_is_decoded() {
    if common::no_llvm() {
        return;
    }
    let only: Option<Vec<String>> = std::env::var("AMDGPU_ISA_GAPS_TARGETS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let mut modes = Vec::new();
    for t in Target::all() {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == t.name()))
        {
            continue;
        }
        // Retired processors LLVM 22 does not know (isa-tables/targets.tsv: gfx942 table).
        if matches!(t.name(), "gfx940" | "gfx941") {
            continue;
        }
        let t = t.with_true16(false);
        modes.push(t);
        if t.family() >= Family::Gfx11 {
            modes.push(t.with_true16(true));
        }
    }
    let start = Instant::now();
    let gaps = Mutex::new(Gaps::new());
    let next = Mutex::new(0usize);
    let stats = Mutex::new((0usize, 0usize, 0usize, Vec::new()));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = {
                    let mut n = next.lock().expect("lock");
                    *n += 1;
                    *n - 1
                };
                let Some(&t) = modes.get(k) else { break };
                let (n, r, fb, c) = run_target(t, &gaps);
                let mut st = stats.lock().expect("lock");
                st.0 += n;
                st.1 += r;
                st.2 += fb;
                st.3.extend(c);
            });
        }
    });
    let gaps = gaps.into_inner().expect("lock");
    let (probed, refused, fallbacks, crashes) = stats.into_inner().expect("lock");
    eprintln!(
        "{} processor modes, {probed} probe words, {refused} refused by us and sent to llvm-mc, {fallbacks} gfx12 VIMAGE -> VOP3P fallbacks of LLVM, {} gaps (format, opcode), {} llvm-mc crashes excluded, {:.1} s",
        modes.len(),
        gaps.len(),
        crashes.len(),
        start.elapsed().as_secs_f64()
    );
    for c in &crashes {
        eprintln!("  llvm-mc crash (excluded): {c}");
    }
    let mut failures = Vec::new();
    let mut used = vec![0usize; KNOWN_GAPS.len()];
    for ((mode, fmt, key), (text, words)) in &gaps {
        let mnemonic = text.split_whitespace().next().unwrap_or("");
        let listed = KNOWN_GAPS
            .iter()
            .position(|g| g.0 == fmt && g.1 == mnemonic);
        eprintln!(
            "  gap{} {mode} {fmt} {key}: {words:08x?} `{text}`",
            if listed.is_some() { " (listed)" } else { "" }
        );
        match listed {
            Some(i) => used[i] += 1,
            None => failures.push(format!("{mode} {fmt} opcode {key}: LLVM decodes `{text}`")),
        }
    }
    for (g, n) in KNOWN_GAPS.iter().zip(&used) {
        eprintln!(
            "  listed gap {} {}: {n} (processor mode, opcode) pairs; {}",
            g.0, g.1, g.2
        );
        if *n == 0 && only.is_none() {
            failures.push(format!("{} {}: listed gap no longer found", g.0, g.1));
        }
    }
    assert!(
        failures.is_empty(),
        "{} gaps: {failures:#?}",
        failures.len()
    );
}
