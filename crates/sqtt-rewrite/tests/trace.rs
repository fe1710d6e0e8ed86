//! `SQTT_TRACE_ADDRESSES` end to end (spec "Address Tracing"), checked against LLVM 22:
//!
//! - every `addr_trace_*` funcmap row carries the `R:` count the spec tabulates for its kind and
//!   the object's wave size (wave64: 130 flat/global, 66 LDS and permutes, 69 raw buffer, 133
//!   struct buffer; wave32: 66, 34, 37, 69), and one `W:` row gives the wave size;
//! - every inserted block is executed on the `sqtt-interp` model wave from a random register
//!   state and random EXEC, and the shaderdata words must equal the spec's framing computed here
//!   from the traced instruction *as llvm-objdump-22 prints it* (registers, `offset:`,
//!   `offset0:`/`offset1:`, `offen`/`idxen`, `soffset`): header, `exec_lo`, `exec_hi`, then every
//!   lane's address (or the buffer components), lane by lane;
//! - the first block of each object is compared instruction by instruction with a reviewed
//!   listing (`tests/golden/trace/*.txt`; `SQTT_UPDATE_GOLDEN=1` rewrites them).
//!
//! Objects: the `memory` fixtures (HIP, clang-22) for gfx9 wave64, gfx10/gfx11/gfx12 wave32 and
//! wave64 and gfx1250, plus hand-written kernels assembled by clang-22 for the forms HIP code
//! does not produce (struct buffers with `idxen`, `soffset` in M0, `ds_*2addr_stride64`, `saddr`
//! with a negative offset, returning flat atomics).

mod common;

use sqtt_funcmap::Row;
use sqtt_interp::{run, Wave};
use sqtt_rewrite::config::{Options, TraceAddresses};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn llvm(tool: &str) -> PathBuf {
    let p = PathBuf::from(format!("/usr/lib/llvm-22/bin/{tool}"));
    assert!(
        p.exists(),
        "LLVM 22 tool {} missing (apt-get install llvm-22)",
        p.display()
    );
    p
}

fn no_llvm() -> bool {
    std::env::var("SQTT_NO_LLVM").is_ok()
}

fn opts() -> Options {
    Options {
        trace_addresses: Some(TraceAddresses {
            memory: true,
            lds: true,
        }),
        ..Options::default()
    }
}

/// The spec's "Address width by type" table, per funcmap name and wave size.
fn spec_count(name: &str, wave: u32) -> u32 {
    let table: [(&str, u32, u32); 4] = [
        ("struct_buffer", 133, 69),
        ("buffer", 69, 37),
        ("lds", 66, 34),
        ("permute", 66, 34),
    ];
    for (key, w64, w32) in table {
        if name.contains(key) {
            return if wave == 64 { w64 } else { w32 };
        }
    }
    if wave == 64 {
        130
    } else {
        66
    }
}

/// One llvm-objdump-22 line: address, instruction text (comment stripped).
struct Line {
    addr: u64,
    text: String,
}

fn disassemble(file: &Path, mcpu: &str) -> Vec<Line> {
    let out = Command::new(llvm("llvm-objdump"))
        .args(["-d", "--no-show-raw-insn", &format!("--mcpu={mcpu}")])
        .arg(file)
        .output()
        .expect("llvm-objdump-22");
    assert!(out.status.success());
    let mut lines = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        // "\ts_mov_b32 m0, 0x98 \t// 000000003070: BEFC..."  or with --no-show-raw-insn
        // "\ts_mov_b32 m0, 0x98   // 000000003070: "
        let Some((text, rest)) = l.split_once("// ") else {
            continue;
        };
        let Some(hex) = rest.split(':').next() else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(hex.trim(), 16) else {
            continue;
        };
        lines.push(Line {
            addr,
            text: text.trim().to_string(),
        });
    }
    lines
}

/// Mnemonic, operands and modifiers of an llvm-objdump instruction text.
fn split(text: &str) -> (String, Vec<String>, Vec<String>) {
    let (m, rest) = text.split_once(' ').unwrap_or((text, ""));
    let mut ops: Vec<String> = rest.split(',').map(|s| s.trim().to_string()).collect();
    let mut mods = Vec::new();
    if let Some(last) = ops.pop() {
        let mut it = last.split_whitespace();
        if let Some(first) = it.next() {
            if first.contains(':') && !first.starts_with('v') && !first.starts_with('s') {
                mods.push(first.to_string());
            } else {
                ops.push(first.to_string());
            }
        }
        mods.extend(it.map(str::to_string));
    }
    ops.retain(|o| !o.is_empty());
    (m.to_string(), ops, mods)
}

/// First register number of `v5`, `v[4:5]`, `s[4:7]`, `s3`.
fn reg(op: &str) -> u16 {
    let t = op.trim_start_matches(['v', 's']).trim_start_matches('[');
    let n: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    n.parse().unwrap_or_else(|_| panic!("not a register: {op}"))
}

fn num(text: &str) -> i64 {
    match text.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).unwrap(),
        None => match text.strip_prefix("-0x") {
            Some(h) => -i64::from_str_radix(h, 16).unwrap(),
            None => text.parse().unwrap(),
        },
    }
}

fn modifier(mods: &[String], key: &str) -> Option<i64> {
    mods.iter()
        .find_map(|m| m.strip_prefix(&format!("{key}:")).map(num))
}

/// 2-address DS operations (two blocks each).
fn two_address(text: &str) -> bool {
    [
        "ds_read2",
        "ds_write2",
        "ds_load_2addr",
        "ds_store_2addr",
        "ds_wrxchg2",
        "ds_storexchg_2addr",
    ]
    .iter()
    .any(|p| text.starts_with(p))
}

/// Operations the spec's address-trace table covers (flat/global/buffer loads, stores and
/// atomics; LDS operations and lane shuffles), by llvm-objdump mnemonic.
fn qualifies(text: &str) -> bool {
    const NOT: [&str; 14] = [
        "buffer_wbinvl1",
        "buffer_gl0_inv",
        "buffer_gl1_inv",
        "buffer_inv",
        "buffer_wbl2",
        "global_inv",
        "global_wb",
        "global_prefetch",
        "flat_prefetch",
        "ds_swizzle",
        "ds_nop",
        "ds_gws",
        "ds_ordered_count",
        "scratch_",
    ];
    is_memory(text) && !NOT.iter().any(|p| text.starts_with(p))
}

fn is_memory(m: &str) -> bool {
    ["global_", "flat_", "buffer_", "ds_", "scratch_", "tbuffer_"]
        .iter()
        .any(|p| m.starts_with(p))
}

/// The payload words (after header, exec_lo, exec_hi) the spec requires for `op` (llvm-objdump
/// text), address `part` (0, or 1 for the second address of a 2-address DS op), on `w`.
fn expected_payload(op: &str, part: usize, w: &Wave) -> Vec<u32> {
    let (m, ops, mods) = split(op);
    let lanes = 0..w.wave_size as usize;
    let v = |r: u16, lane: usize| w.vgpr[usize::from(r)][lane];
    let s = |r: u16| w.sgpr[usize::from(r)];
    let offset = modifier(&mods, "offset").unwrap_or(0);
    if m.starts_with("ds_") {
        let permute = m.contains("permute");
        let reads = m.contains("read") || m.contains("load") || m.contains("rtn") || permute;
        let a = reg(&ops[usize::from(reads)]);
        if permute {
            // the effective index: the VGPR plus the instruction's offset field
            return lanes.map(|l| v(a, l).wrapping_add(offset as u32)).collect();
        }
        let two = two_address(&m);
        let off = if two {
            let unit = if m.contains("b64") { 8 } else { 4 }
                * if m.contains("st64") || m.contains("stride64") {
                    64
                } else {
                    1
                };
            modifier(&mods, if part == 0 { "offset0" } else { "offset1" }).unwrap_or(0) * unit
        } else {
            offset
        };
        return lanes.map(|l| v(a, l).wrapping_add(off as u32)).collect();
    }
    if m.starts_with("buffer_") || m.starts_with("tbuffer_") {
        let offen = mods.iter().any(|x| x == "offen");
        let idxen = mods.iter().any(|x| x == "idxen");
        let r = reg(&ops[2]);
        let so = match ops[3].as_str() {
            "m0" => w.m0,
            "null" => 0,
            x if x.starts_with('s') => s(reg(x)),
            x => num(x) as u32,
        };
        let a = if offen || idxen {
            Some(reg(&ops[1]))
        } else {
            None
        };
        let (vindex, voffset) = match (idxen, offen, a) {
            (true, true, Some(a)) => (Some(a), Some(a + 1)),
            (true, false, Some(a)) => (Some(a), None),
            (false, true, Some(a)) => (None, Some(a)),
            _ => (None, None),
        };
        let mut out = vec![s(r), s(r + 1), so];
        out.extend(
            lanes
                .clone()
                .map(|l| voffset.map_or(0, |x| v(x, l)).wrapping_add(offset as u32)),
        );
        if let Some(x) = vindex {
            out.extend(lanes.map(|l| v(x, l)));
        }
        return out;
    }
    // FLAT / GLOBAL: vaddr is operand 1 of loads and returning atomics, else operand 0.
    let flat = m.starts_with("flat_");
    let n_ops_noret = if flat { 2 } else { 3 };
    let returns = m.contains("load") || ops.len() > n_ops_noret;
    let a = &ops[usize::from(returns)];
    let saddr = (!flat)
        .then(|| ops.last().cloned())
        .flatten()
        .filter(|x| x.starts_with("s[") || x == "vcc");
    let mut out = Vec::new();
    for l in lanes {
        let base = match &saddr {
            Some(sa) => {
                let pair = if sa == "vcc" {
                    w.vcc
                } else {
                    let b = reg(sa);
                    u64::from(s(b + 1)) << 32 | u64::from(s(b))
                };
                let vo = v(reg(a), l);
                // gfx1250 sign-extends the VGPR offset and `scale_offset` multiplies it by the
                // access size (LLVM hasSignedGVSOffset); earlier targets zero-extend it.
                let vo = if w.target.family() == amdgpu_isa::Family::Gfx1250 {
                    let n = if mods.iter().any(|x| x == "scale_offset") {
                        data_bytes(&m)
                    } else {
                        1
                    };
                    (i64::from(vo as i32) * n) as u64
                } else {
                    u64::from(vo)
                };
                pair.wrapping_add(vo)
            }
            None => {
                let b = reg(a);
                u64::from(v(b + 1, l)) << 32 | u64::from(v(b, l))
            }
        };
        let addr = base.wrapping_add(offset as u64);
        out.push(addr as u32);
        out.push((addr >> 32) as u32);
    }
    out
}

/// Bytes per lane named by a FLAT/GLOBAL mnemonic's last `_` part (`global_load_b64` → 8).
fn data_bytes(m: &str) -> i64 {
    let last = m.rsplit('_').next().unwrap_or_default();
    let bits: i64 = last
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or_else(|_| panic!("{m}: no data type suffix"));
    bits / 8
}

/// A seeded xorshift generator: reproducible random states.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn random_wave(t: amdgpu_isa::Target, wave: u32, rng: &mut Rng) -> Wave {
    let mut w = Wave::new(t, wave).unwrap();
    for r in w.sgpr.iter_mut() {
        *r = rng.next() as u32;
    }
    for v in w.vgpr.iter_mut() {
        for lane in v.iter_mut() {
            *lane = rng.next() as u32;
        }
    }
    w.exec = rng.next() & w.lane_mask();
    w.m0 = rng.next() as u32;
    w.scc = rng.next() & 1 == 1;
    w.vcc = rng.next();
    w
}

/// What one object yielded.
struct Checked {
    blocks: usize,
    kinds: BTreeMap<String, u32>,
}

/// Rewrites `input`, checks the funcmap rows and executes every block. `golden` names the
/// listing file of the object's first block.
fn check_object(input: &[u8], mcpu: &str, wave: u32, golden: &str) -> Checked {
    let out = rewrite(input, &opts()).unwrap_or_else(|e| panic!("{golden}: {e}"));
    assert_eq!(
        out.report.status,
        Status::Instrumented,
        "{golden}: {:?}",
        out.report.reasons
    );
    // The only accepted losses (reported, never silent): an op inside an `s_delay_alu` /
    // `s_clause` window whose address registers are written within the window, and gfx1250
    // `scale_offset` addressing.
    assert!(
        out.report.skipped.iter().all(|k| k
            .why
            .starts_with("no insertion point in front of the operation")
            || k.why.contains("scale_offset")),
        "{golden}: skipped {:?}",
        out.report.skipped
    );
    let bytes = out.bytes.unwrap();
    let v = sqtt_verify::verify(input, &bytes).unwrap();
    assert!(v.findings.is_empty(), "{golden}: {:?}", v.findings);
    let co = hsaco::CodeObject::parse(&bytes).unwrap();
    // Funcmap: W: row and R: counts per kind.
    let rows = sqtt_funcmap::parse(co.funcmap().unwrap()).rows;
    assert!(rows.contains(&Row::WaveSize(wave)), "{golden}: no W:{wave}");
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
    for r in &rows {
        match r {
            Row::Point { id, name, .. } if name.starts_with("addr_trace_") => {
                names.insert(*id, name.clone());
            }
            Row::Payload { id, count } => {
                counts.insert(*id, *count);
            }
            _ => {}
        }
    }
    let mut kinds = BTreeMap::new();
    for (id, name) in &names {
        assert_eq!(
            counts.get(id).copied(),
            Some(spec_count(name, wave)),
            "{golden}: R: count of {name} id {id}"
        );
        *kinds.entry(name.clone()).or_insert(0) += 1;
    }
    // Blocks: header `s_mov_b32 m0, id << 2`, preceded by M0/SCC saves of the same block.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.co");
    std::fs::write(&file, &bytes).unwrap();
    let lines = disassemble(&file, mcpu);
    let text = co.text().unwrap().clone();
    let code = co.section_data(&text);
    let header_id = |l: &Line| -> Option<u32> {
        let v = l.text.strip_prefix("s_mov_b32 m0, ")?.trim();
        let v = match v.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16).ok()?,
            None => v.parse::<u32>().ok()?,
        };
        (v & 3 == 0 && names.contains_key(&(v >> 2))).then_some(v >> 2)
    };
    let starts: Vec<(usize, u32)> = lines
        .iter()
        .enumerate()
        // A header is sent right before `exec_lo` (payload constants can look like headers).
        .filter(|(i, _)| {
            lines.get(i + 2).is_some_and(|l| l.text == "s_ttracedata")
                && lines
                    .get(i + 3)
                    .is_some_and(|l| l.text == "s_mov_b32 m0, exec_lo")
        })
        .filter_map(|(i, l)| header_id(l).map(|id| (i, id)))
        .map(|(i, id)| {
            let mut s = i;
            while s > 0 {
                let p = &lines[s - 1].text;
                let save = (p.starts_with("s_mov_b32 s") && p.ends_with(", m0"))
                    || (p.starts_with("s_cselect_b32 s") && p.ends_with(", 1, 0"));
                if !save || s + 3 <= i {
                    break;
                }
                s -= 1;
            }
            (s, id)
        })
        .collect();
    assert_eq!(starts.len(), names.len(), "{golden}: headers found");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(wave));
    let t = amdgpu_isa::Target::from_name(mcpu).unwrap();
    let op_of = |s: usize| {
        (s..lines.len())
            .find(|&i| is_memory(&lines[i].text))
            .expect("traced op after its block")
    };
    // Which memory ops carry blocks, decided here from llvm-objdump's text: the qualifying
    // mnemonics of the spec's table, minus the ops the report names as skipped (matched through
    // the input's disassembly: memory ops keep their order, none is inserted).
    let orig_file = dir.path().join("in.co");
    std::fs::write(&orig_file, input).unwrap();
    let orig_mem: Vec<u64> = disassemble(&orig_file, mcpu)
        .iter()
        .filter(|l| is_memory(&l.text))
        .map(|l| l.addr)
        .collect();
    let out_mem: Vec<usize> = (0..lines.len())
        .filter(|&i| is_memory(&lines[i].text))
        .collect();
    assert_eq!(
        orig_mem.len(),
        out_mem.len(),
        "{golden}: memory ops in and out"
    );
    let skipped: std::collections::BTreeSet<u64> =
        out.report.skipped.iter().map(|k| k.addr).collect();
    let blocks_of = |n: usize| -> usize {
        let t = lines[out_mem[n]].text.as_str();
        if skipped.contains(&orig_mem[n]) || !qualifies(t) {
            0
        } else if two_address(t) {
            2
        } else {
            1
        }
    };
    // Blocks in front of the same op belong, in order, to the qualifying memory ops from there
    // on (blocks hoisted above an `s_clause` precede all of its ops).
    let mem_pos = |line: usize| out_mem.iter().position(|&x| x == line).unwrap();
    let mut owner: Vec<(usize, usize)> = Vec::new(); // (op line, address part)
    let (mut cur, mut used) = (0usize, 0usize);
    for (k, &(s, _)) in starts.iter().enumerate() {
        if k == 0 || op_of(starts[k - 1].0) != op_of(s) {
            cur = mem_pos(op_of(s));
            used = 0;
        }
        while used >= blocks_of(cur) {
            cur += 1;
            used = 0;
        }
        owner.push((out_mem[cur], used));
        used += 1;
    }
    for (k, &(s, id)) in starts.iter().enumerate() {
        let (op_idx, part) = owner[k];
        // The block ends after its lane loops (two for struct buffers) and the restores that
        // follow them (a block may have been hoisted above originals of an `s_clause` or
        // `s_delay_alu` window, so the op is not always next).
        let loops = if names[&id].contains("struct_buffer") {
            2
        } else {
            1
        };
        let mut j = s;
        let mut seen = 0;
        while seen < loops {
            if lines[j].text.starts_with("s_cbranch_scc1") {
                seen += 1;
            }
            j += 1;
        }
        loop {
            let t = lines[j].text.as_str();
            if t.starts_with("s_wait_alu") || t == "s_waitcnt_vscnt null, 0x0" {
                j += 1;
            } else if t.starts_with("s_mov_b32 m0, ") && lines[j + 1].text == "s_nop 0" {
                j += 2;
            } else if t.starts_with("s_cmp_lg_u32 s") && t.ends_with(", 0") {
                j += 1;
            } else {
                break;
            }
        }
        let end_idx = j;
        let (a, b) = (lines[s].addr, lines[end_idx].addr);
        let slice = &code[(a - text.addr) as usize..(b - text.addr) as usize];
        for _ in 0..3 {
            let mut w = random_wave(t, wave, &mut rng);
            let before = w.clone();
            let r = run(&mut w, slice, a, 1_000_000).unwrap_or_else(|e| panic!("{golden}: {e}"));
            assert_eq!(
                r.exit_pc, b,
                "{golden}: block at {a:#x} exits at {:#x}",
                r.exit_pc
            );
            let e = before.exec & before.lane_mask();
            let mut want = vec![id << 2, e as u32, (e >> 32) as u32];
            want.extend(expected_payload(&lines[op_idx].text, part, &before));
            assert_eq!(
                r.shaderdata, want,
                "{golden}: block at {a:#x} for `{}` (part {part})",
                lines[op_idx].text
            );
            assert_eq!(r.shaderdata.len() as u32, 1 + counts[&id]);
        }
        if k == 0 {
            let listing: String = lines[s..=op_idx]
                .iter()
                .map(|l| format!("{}\n", l.text))
                .collect();
            let path = root()
                .join("crates/sqtt-rewrite/tests/golden/trace")
                .join(format!("{golden}.txt"));
            if std::env::var("SQTT_UPDATE_GOLDEN").is_ok() {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &listing).unwrap();
            }
            let want = std::fs::read_to_string(&path)
                .unwrap_or_else(|_| panic!("missing {} (SQTT_UPDATE_GOLDEN=1)", path.display()));
            assert_eq!(
                listing, want,
                "{golden}: first block differs from the reviewed listing"
            );
        }
    }
    Checked {
        blocks: starts.len(),
        kinds,
    }
}

#[test]
fn memory_fixtures_every_generation() {
    if no_llvm() {
        return;
    }
    let cases = [
        ("gfx942__memory__O3.co", "gfx942", 64),
        ("gfx90a__memory__O3.co", "gfx90a", 64),
        ("gfx1030__memory__O3.co", "gfx1030", 32),
        ("gfx1030__memory__O3-wave64.co", "gfx1030", 64),
        ("gfx1100__memory__O3.co", "gfx1100", 32),
        ("gfx1100__memory__O3-wave64.co", "gfx1100", 64),
        ("gfx1201__memory__O3.co", "gfx1201", 32),
        ("gfx1201__memory__O3-wave64.co", "gfx1201", 64),
        ("gfx1250__memory__O3.co", "gfx1250", 32),
    ];
    for (file, mcpu, wave) in cases {
        let input = std::fs::read(root().join("fixtures/objects").join(file)).unwrap();
        let c = check_object(&input, mcpu, wave, file.trim_end_matches(".co"));
        eprintln!("{file}: {} blocks {:?}", c.blocks, c.kinds);
        for kind in [
            "addr_trace_load",
            "addr_trace_store",
            "addr_trace_atomic",
            "addr_trace_lds_load",
            "addr_trace_lds_store",
            "addr_trace_lds_atomic",
            "addr_trace_buffer_load",
            "addr_trace_buffer_store",
            "addr_trace_buffer_atomic",
            "addr_trace_ds_bpermute",
        ] {
            assert!(c.kinds.contains_key(kind), "{file}: no {kind} block");
        }
    }
}

/// Assembles and links one kernel `k` with `body` for `mcpu` (clang-22, ld.lld-22).
/// `fixtures/src/clause_hint.S` (issue 39 item 7): an `s_clause` group inside an `s_delay_alu`
/// window whose address pair the VALU right before the clause writes (ggml's `mul_mat_vec_q`
/// shape). Both loads were skipped ("no insertion point in front of the operation"); their blocks
/// now go in front of the `s_clause`, which stays whole: llvm-objdump-22 shows it still followed
/// by its two loads, every block runs in the interpreter with the payload of its load, and the
/// verifier accepts the object.
#[test]
fn clause_inside_delay_alu_window_is_traced_in_front_of_the_clause() {
    if no_llvm() {
        return;
    }
    for mcpu in ["gfx1100", "gfx1201"] {
        let file = format!("{mcpu}__clause-hint__O3.co");
        let input = std::fs::read(root().join("fixtures/objects").join(&file)).unwrap();
        let out = rewrite(&input, &opts()).unwrap();
        assert!(
            out.report.skipped.is_empty(),
            "{file}: {:?}",
            out.report.skipped
        );
        let c = check_object(&input, mcpu, 32, file.trim_end_matches(".co"));
        assert_eq!(c.blocks, 3, "{file}: two loads and the store");
        let bytes = out.bytes.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("out.co");
        std::fs::write(&f, &bytes).unwrap();
        let lines = disassemble(&f, mcpu);
        let at = lines
            .iter()
            .position(|l| l.text == "s_clause 0x1")
            .unwrap_or_else(|| panic!("{file}: the s_clause is kept"));
        for (k, off) in [(1, 16), (2, 32)] {
            assert!(
                lines[at + k].text.starts_with(&format!(
                    "global_load_b32 v{}, v[10:11], off offset:{off}",
                    4 + k
                )),
                "{file}: the clause is not split: {:?}",
                lines[at..at + 3]
                    .iter()
                    .map(|l| &l.text)
                    .collect::<Vec<_>>()
            );
        }
        // Mutation: a wrong clause length in the output (`s_clause 0x2`, the word 0xbf850001
        // with simm16 2) must be rejected.
        let word = 0xbf85_0001u32.to_le_bytes();
        let hits: Vec<usize> = (0..bytes.len() - 3)
            .filter(|&k| bytes[k..k + 4] == word)
            .collect();
        assert_eq!(hits.len(), 1, "{file}: one s_clause 0x1 word");
        let mut broken = bytes.clone();
        broken[hits[0]] = 2;
        let v = sqtt_verify::verify(&input, &broken).unwrap();
        assert!(
            v.findings
                .iter()
                .any(|x| x.to_string().contains("s_clause")),
            "{file}: a lengthened clause is accepted: {:?}",
            v.findings
        );
    }
}

/// gfx1010 (rocRAND's `mtgp32` kernels, issue 39 item 7): the compiler's
/// `s_waitcnt_vscnt null, 0` for the LDS → branch → VMEM hazard sits inside an `s_clause` window,
/// between the `s_clause` and its first load. The wait counts stores only and readies no
/// register, so the loads' blocks go in front of the `s_clause` (they were skipped: "no insertion
/// point in front of the operation"); the clause stays whole, every block runs in the
/// interpreter with the payload of its load, and the verifier accepts the object.
#[test]
fn clause_with_a_store_wait_is_traced_in_front_of_the_clause() {
    if no_llvm() {
        return;
    }
    let body = "  ds_read_b32 v9, v10
  s_clause 0x2
  s_waitcnt_vscnt null, 0x0
  global_load_dword v7, v[3:4], off offset:12
  global_load_dword v8, v[5:6], off offset:64
  global_load_dword v12, v[5:6], off offset:136";
    let input = assemble_kernel("gfx1010", true, body);
    let out = rewrite(&input, &opts()).unwrap();
    assert!(out.report.skipped.is_empty(), "{:?}", out.report.skipped);
    let c = check_object(&input, "gfx1010", 32, "asm_gfx1010_clause_wait");
    assert_eq!(c.blocks, 4, "the LDS load and three global loads");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out.co");
    std::fs::write(&f, out.bytes.unwrap()).unwrap();
    let lines = disassemble(&f, "gfx1010");
    let at = lines
        .iter()
        .position(|l| l.text == "s_clause 0x2")
        .expect("the s_clause is kept");
    let window: Vec<&str> = lines[at + 1..at + 4]
        .iter()
        .map(|l| l.text.as_str())
        .collect();
    assert!(
        window[0] == "s_waitcnt_vscnt null, 0x0"
            && window[1].starts_with("global_load_dword v7, v[3:4], off offset:12")
            && window[2].starts_with("global_load_dword v8, v[5:6], off offset:64"),
        "the clause is not split: {window:?}"
    );
}

/// `vcc` as a GLOBAL `saddr` base (rocRAND 7.2.4's threefry kernels: `global_store_dwordx2 v3,
/// v[18:19], vcc`, skipped before as "a 64-bit address without a VGPR pair or an SGPR base"):
/// traced on gfx9-gfx11, every block run in the interpreter against `vcc_hi:vcc_lo + v + offset`;
/// on gfx12 skipped with its own reason (the SALU hazard on VCC is not modelled there).
#[test]
fn vcc_as_saddr_base() {
    if no_llvm() {
        return;
    }
    for (mcpu, wave32, wave, body) in [
        (
            "gfx942",
            false,
            64,
            "  global_store_dwordx2 v3, v[18:19], vcc\n  global_load_dword v7, v8, vcc offset:-16",
        ),
        (
            "gfx1100",
            true,
            32,
            "  global_store_b64 v3, v[18:19], vcc offset:8\n  global_load_b32 v7, v8, vcc offset:-16",
        ),
    ] {
        let input = assemble_kernel(mcpu, wave32, body);
        let golden = format!("asm_{mcpu}_vcc_saddr");
        let out = rewrite(&input, &opts()).unwrap();
        assert!(out.report.skipped.is_empty(), "{golden}: {:?}", out.report.skipped);
        let c = check_object(&input, mcpu, wave, &golden);
        assert_eq!(c.blocks, 2, "{golden}");
    }
    let input = assemble_kernel(
        "gfx1201",
        true,
        "  global_store_b64 v3, v[18:19], vcc offset:8",
    );
    let out = rewrite(&input, &opts()).unwrap();
    let why: Vec<&str> = out.report.skipped.iter().map(|k| k.why.as_str()).collect();
    assert_eq!(
        why,
        ["global_store_b64: VCC as the saddr base on gfx12 (its SALU hazards on VCC are not modelled)"]
    );
}

fn assemble_kernel(mcpu: &str, wave32: bool, body: &str) -> Vec<u8> {
    let gfx9 = mcpu.starts_with("gfx9");
    let accum = if mcpu == "gfx90a" || mcpu.starts_with("gfx94") || mcpu == "gfx950" {
        "    .amdhsa_accum_offset 32\n"
    } else {
        ""
    };
    let w32 = if gfx9 {
        String::new()
    } else {
        format!("    .amdhsa_wavefront_size32 {}\n", u8::from(wave32))
    };
    let asm = format!(
        "  .amdhsa_code_object_version 5\n  .text\n  .globl k\n  .p2align 8\n  .type k,@function\nk:\n{body}\n  s_endpgm\n.Lk_end:\n  .size k, .Lk_end - k\n  .rodata\n  .p2align 6\n  .amdhsa_kernel k\n    .amdhsa_next_free_vgpr 32\n    .amdhsa_next_free_sgpr 24\n{accum}{w32}  .end_amdhsa_kernel\n  .amdgpu_metadata\n---\namdhsa.kernels:\n  - .name: k\n    .symbol: k.kd\n    .kernarg_segment_size: 0\n    .kernarg_segment_align: 8\n    .group_segment_fixed_size: 0\n    .private_segment_fixed_size: 0\n    .wavefront_size: {}\n    .sgpr_count: 24\n    .vgpr_count: 32\n    .max_flat_workgroup_size: 256\namdhsa.version: [1, 2]\n...\n  .end_amdgpu_metadata\n",
        if wave32 { 32 } else { 64 }
    );
    common::build_code_object("assembler", &asm, mcpu, &[])
}

#[test]
fn assembled_forms_struct_buffers_m0_soffset_stride64() {
    if no_llvm() {
        return;
    }
    let gfx9 = "  buffer_load_dword v1, v[2:3], s[4:7], m0 idxen offen offset:16
  buffer_store_dword v1, v2, s[4:7], s3 idxen offset:4
  buffer_atomic_add v1, v[2:3], s[8:11], 0 idxen offen
  buffer_load_dword v20, off, s[8:11], -1 offset:40
  ds_read2st64_b32 v[4:5], v6 offset0:1 offset1:2
  ds_write2_b64 v6, v[8:9], v[10:11] offset0:3 offset1:9
  global_load_dword v7, v8, s[10:11] offset:-16
  flat_atomic_add v9, v[10:11], v12 offset:8 sc0
  ds_permute_b32 v13, v14, v15";
    let gfx10 = "  buffer_load_dword v1, v[2:3], s[4:7], m0 idxen offen offset:16
  buffer_store_dword v1, v2, s[4:7], s3 idxen offset:4
  buffer_atomic_add v1, v[2:3], s[8:11], 0 idxen offen
  buffer_load_dword v20, off, s[8:11], -1 offset:40
  ds_read2st64_b32 v[4:5], v6 offset0:1 offset1:2
  ds_write2_b64 v6, v[8:9], v[10:11] offset0:3 offset1:9
  global_load_dword v7, v8, s[10:11] offset:-16
  flat_atomic_add v9, v[10:11], v12 offset:8 glc
  ds_permute_b32 v13, v14, v15";
    let gfx11 = "  buffer_load_b32 v1, v[2:3], s[4:7], m0 idxen offen offset:16
  buffer_store_b32 v1, v2, s[4:7], s3 idxen offset:4
  buffer_atomic_add_u32 v1, v[2:3], s[8:11], 0 idxen offen
  buffer_load_b32 v20, off, s[8:11], -1 offset:40
  ds_load_2addr_stride64_b32 v[4:5], v6 offset0:1 offset1:2
  ds_store_2addr_b64 v6, v[8:9], v[10:11] offset0:3 offset1:9
  global_load_b32 v7, v8, s[10:11] offset:-16
  flat_atomic_add_u32 v9, v[10:11], v12 offset:8 glc
  ds_permute_b32 v13, v14, v15";
    let gfx12 = "  buffer_load_b32 v1, v[2:3], s[4:7], m0 idxen offen offset:16
  buffer_store_b32 v1, v2, s[4:7], s3 idxen offset:4
  buffer_atomic_add_u32 v1, v[2:3], s[8:11], null idxen offen
  buffer_load_b32 v20, off, s[8:11], s12 offset:40
  ds_load_2addr_stride64_b32 v[4:5], v6 offset0:1 offset1:2
  ds_store_2addr_b64 v6, v[8:9], v[10:11] offset0:3 offset1:9
  global_load_b32 v7, v8, s[10:11] offset:-16
  flat_atomic_add_u32 v9, v[10:11], v12 offset:8 th:TH_ATOMIC_RETURN
  ds_permute_b32 v13, v14, v15";
    let cases: [(&str, bool, u32, String); 6] = [
        ("gfx942", true, 64, gfx9.to_string()),
        ("gfx1030", true, 32, gfx10.to_string()),
        ("gfx1100", true, 32, gfx11.to_string()),
        ("gfx1100", false, 64, gfx11.to_string()),
        ("gfx1201", true, 32, gfx12.to_string()),
        ("gfx1201", false, 64, gfx12.to_string()),
    ];
    for (mcpu, wave32, wave, body) in cases {
        let co = assemble_kernel(mcpu, wave32, &body);
        let golden = format!("asm_{mcpu}_w{wave}");
        let c = check_object(&co, mcpu, wave, &golden);
        eprintln!("{golden}: {} blocks {:?}", c.blocks, c.kinds);
        // 9 operations, two of them 2-address: 11 blocks.
        assert_eq!(c.blocks, 11, "{golden}");
        for kind in [
            "addr_trace_struct_buffer_load",
            "addr_trace_struct_buffer_store",
            "addr_trace_struct_buffer_atomic",
            "addr_trace_buffer_load",
            "addr_trace_lds_load",
            "addr_trace_lds_store",
            "addr_trace_load",
            "addr_trace_atomic",
            "addr_trace_ds_permute",
        ] {
            assert!(c.kinds.contains_key(kind), "{golden}: no {kind} block");
        }
    }
}

#[test]
fn source_locations_from_dwarf_inline_chains() {
    if no_llvm() {
        return;
    }
    for file in ["gfx942__memory__O3-g.co", "gfx1100__memory__O3-g.co"] {
        let input = std::fs::read(root().join("fixtures/objects").join(file)).unwrap();
        let out = rewrite(&input, &opts()).unwrap();
        let bytes = out.bytes.expect("instrumented");
        let co = hsaco::CodeObject::parse(&bytes).unwrap();
        let rows = sqtt_funcmap::parse(co.funcmap().unwrap()).rows;
        let locs: Vec<&Option<String>> = rows
            .iter()
            .filter_map(|r| match r {
                Row::Point { name, loc, .. } if name.starts_with("addr_trace_") => Some(loc),
                _ => None,
            })
            .collect();
        assert!(locs.len() > 20, "{file}: {} rows", locs.len());
        // Every op of memory.hip comes from a line of memory.hip (innermost first); inlined
        // helpers from fx.h show as a chain ending in memory.hip.
        for l in &locs {
            let l = l
                .as_deref()
                .unwrap_or_else(|| panic!("{file}: row without location"));
            let outer = l.rsplit(" -> ").next().unwrap();
            assert!(
                outer.contains("memory.hip:") || outer.contains("fx.h:"),
                "{file}: {l}"
            );
        }
        assert!(
            locs.iter()
                .any(|l| l.as_deref().is_some_and(|l| l.contains(" -> "))),
            "{file}: no inline chain at all"
        );
    }
}
