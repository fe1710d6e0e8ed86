//! Turns the committed tables in `<workspace>/isa-tables/` (generated from LLVM 22 by
//! `tools/isa-gen/generate.sh`) into Rust statics in `$OUT_DIR/tables.rs`. No run-time parsing.
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn read(p: &Path) -> String {
    println!("cargo:rerun-if-changed={}", p.display());
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn rows(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split('\t').collect())
}

fn format_variant(name: &str) -> &'static str {
    match name {
        "SOP1" => "Sop1",
        "SOP2" => "Sop2",
        "SOPK" => "Sopk",
        "SOPC" => "Sopc",
        "SOPP" => "Sopp",
        "SMEM" => "Smem",
        "VOP1" => "Vop1",
        "VOP2" => "Vop2",
        "VOPC" => "Vopc",
        "VOP3" => "Vop3",
        "VOP3P" => "Vop3p",
        "VOPD" => "Vopd",
        "VOPD3" => "Vopd3",
        "VINTRP" => "Vintrp",
        "VINTERP" => "Vinterp",
        "LDSDIR" => "Ldsdir",
        "DS" => "Ds",
        "FLAT" => "Flat",
        "VFLAT" => "Flat",
        "MUBUF" => "Mubuf",
        "MTBUF" => "Mtbuf",
        "MIMG" => "Mimg",
        "VBUFFER" => "Vbuffer",
        "VIMAGE" => "Vimage",
        "VSAMPLE" => "Vsample",
        "EXP" => "Exp",
        other => panic!("unknown format {other}"),
    }
}

fn family_variant(f: &str) -> &'static str {
    match f {
        "gfx9" => "Gfx9",
        "gfx10" => "Gfx10",
        "gfx11" => "Gfx11",
        "gfx12" => "Gfx12",
        "gfx1250" => "Gfx1250",
        other => panic!("unknown family {other}"),
    }
}

struct Fmt {
    name: String,
    mask: u32,
    value: u32,
    /// Total opcode bits (the key is below `1 << op_width`).
    op_width: u32,
    fields: Vec<(String, String)>, // name, kind
    probes: Vec<String>,
    code: String,
}

fn bits(s: &str) -> (u8, u8, u8) {
    let p: Vec<u8> = s
        .split(':')
        .map(|x| x.parse().expect("bit range"))
        .collect();
    (p[0], p[1], p[2])
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let tables = manifest.join("../../isa-tables");
    let mut out = String::new();

    // Formats per family, ordered most specific match first.
    let formats_txt = read(&tables.join("formats.tsv"));
    let mut fams: BTreeMap<String, Vec<Fmt>> = BTreeMap::new();
    for c in rows(&formats_txt) {
        let (mask, value) = c[3].split_once('/').expect("mask/value");
        let mask = u32::from_str_radix(mask, 16).expect("mask");
        let value = u32::from_str_radix(value, 16).expect("value");
        let op: Vec<_> = c[4]
            .split(',')
            .filter(|s| !s.is_empty())
            .map(bits)
            .collect();
        let mut fields = Vec::new();
        let mut fcode = String::new();
        for f in c[5].split(',').filter(|s| !s.is_empty()) {
            let (name, rest) = f.split_once('@').expect("field");
            let rest = rest.split('=').next().expect("field");
            let p: Vec<&str> = rest.split(':').collect();
            let kind = match p[3] {
                "s" => "S8",
                "s7" => "S7",
                "v9" => "V9",
                "v" => "V8",
                "sx2" => "Sx2",
                "sx4" => "Sx4",
                "imm" => "Imm",
                k => panic!("kind {k}"),
            };
            write!(
                fcode,
                "FieldDef {{ name: {name:?}, dw: {}, hi: {}, lo: {}, kind: FieldKind::{kind} }},",
                p[0], p[1], p[2]
            )
            .ok();
            fields.push((name.to_string(), kind.to_string()));
        }
        let probes: Vec<String> = c
            .get(6)
            .map(|s| {
                s.split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let mut pcode = String::new();
        for p in &probes {
            pcode.push_str("&[");
            for a in p.split('+') {
                let (n, v) = a.split_once('=').expect("probe");
                let idx = fields.iter().position(|f| f.0 == n).expect("probe field");
                write!(pcode, "({idx}, {v}),").ok();
            }
            pcode.push_str("],");
        }
        let extra = match c.get(8).copied().unwrap_or("") {
            "" => "Extra::None".to_string(),
            e => {
                let (k, b) = e.split_once('@').expect("extra");
                let (dw, hi, lo) = bits(b);
                let k = match k {
                    "nsa_dwords" => "NsaDwords",
                    "nsa_flag" => "NsaFlag",
                    k => panic!("extra {k}"),
                };
                format!("Extra::{k}({dw}, {hi}, {lo})")
            }
        };
        let opcode: String = op
            .iter()
            .map(|(d, h, l)| format!("({d}, {h}, {l}),"))
            .collect();
        let code = format!(
            "FormatDef {{ name: {:?}, format: Format::{}, dwords: {}, mask: {mask:#010x}, value: {value:#010x}, op_bits: &[{opcode}], fields: &[{fcode}], probes: &[{pcode}], extra: {extra} }},",
            c[1], format_variant(c[1]), c[2]
        );
        fams.entry(c[0].to_string()).or_default().push(Fmt {
            name: c[1].to_string(),
            mask,
            value,
            op_width: op.iter().map(|&(_, h, l)| u32::from(h - l) + 1).sum(),
            fields,
            probes,
            code,
        });
    }
    for (fam, fs) in fams.iter_mut() {
        fs.sort_by_key(|f| std::cmp::Reverse(f.mask.count_ones()));
        write!(
            out,
            "pub(crate) static FORMATS_{}: &[FormatDef] = &[",
            fam.to_uppercase()
        )
        .ok();
        for f in fs.iter() {
            out.push_str(&f.code);
            out.push('\n');
        }
        out.push_str("];\n");
        // Direct format dispatch on dword 0 bits 31:23: every format mask lies inside them, so
        // the first matching format (most specific first, as sorted above) depends on them only.
        let mut top9 = Vec::with_capacity(512);
        for t in 0u32..512 {
            let w = t << 23;
            let hit = fs.iter().position(|f| {
                assert_eq!(
                    f.mask & !0xff80_0000,
                    0,
                    "{fam} {}: format mask outside dword 0 bits 31:23",
                    f.name
                );
                w & f.mask == f.value
            });
            top9.push(hit.map_or(u8::MAX, |i| u8::try_from(i).expect("format index")));
        }
        writeln!(
            out,
            "pub(crate) static FMT_BY_TOP9_{}: [u8; 512] = {top9:?};",
            fam.to_uppercase()
        )
        .ok();
    }

    // Overrides.
    let ov = read(&tables.join("overrides.tsv"));
    let mut overrides: HashMap<String, (String, String)> = HashMap::new();
    for c in rows(&ov) {
        overrides.insert(c[0].to_string(), (c[1].to_string(), c[2].to_string()));
    }

    // Scalar operand names per family.
    for fam in fams.keys() {
        let t = read(&tables.join(format!("sregs/{fam}.tsv")));
        let names: Vec<String> = rows(&t).map(|c| c[1].to_string()).collect();
        assert_eq!(names.len(), 256, "sregs/{fam}.tsv");
        writeln!(
            out,
            "pub(crate) static SREGS_{}: [&str; 256] = {:?};",
            fam.to_uppercase(),
            names
        )
        .ok();
    }

    // Symbolic immediates per family (tools/isa-gen/symbolic.py).
    for fam in fams.keys() {
        let t = read(&tables.join(format!("symbolic/{fam}.tsv")));
        let mut hwreg = vec![String::new(); 64];
        let mut rtn = vec![String::new(); 256];
        let mut mtbuf = vec![String::new(); 128];
        let mut sendmsg: Vec<(u16, String)> = Vec::new();
        for c in rows(&t) {
            let v: usize = c[1].parse().expect("symbolic value");
            let text = c[2].to_string();
            match c[0] {
                "hwreg" => hwreg[v] = text,
                "sendmsg_rtn" => rtn[v] = text,
                "mtbuf" => mtbuf[v] = text,
                "sendmsg" => sendmsg.push((v as u16, text)),
                k => panic!("symbolic kind {k}"),
            }
        }
        sendmsg.sort();
        writeln!(
            out,
            "pub(crate) static SYM_{}: SymbolicDef = SymbolicDef {{ hwreg: &{hwreg:?}, sendmsg: &{sendmsg:?}, sendmsg_rtn: &{rtn:?}, mtbuf: &{mtbuf:?} }};",
            fam.to_uppercase()
        )
        .ok();
    }

    // Two-part instructions per opcode table (isa-dump pairs).
    let pairs_txt = read(&tables.join("pairs.tsv"));
    let mut pairs: HashMap<&str, String> = HashMap::new();
    for c in rows(&pairs_txt) {
        let hex = |i: usize| u32::from_str_radix(c[i], 16).expect("pairs.tsv mask/value");
        writeln!(
            pairs.entry(c[0]).or_default(),
            "PairDef {{ prefix: {}, mask: [{}, {}, {}, {}], value: [{}, {}, {}, {}], mc_name: {:?}, mnemonic: {:?} }},",
            c[1], hex(3), hex(4), hex(5), hex(6), hex(7), hex(8), hex(9), hex(10), c[11], c[12]
        )
        .ok();
    }
    // Opcode tables, deduplicated by content.
    let targets_txt = read(&tables.join("targets.tsv"));
    let mut table_ids: HashMap<String, usize> = HashMap::new(); // table name -> id
    let mut contents: HashMap<String, usize> = HashMap::new();
    let mut tcode = String::new();
    for c in rows(&targets_txt) {
        let (name, fam, table, mach, t16) =
            (c[0], c[1], c[2], c[3], c.get(4).copied().unwrap_or("-"));
        let main_id = emit_table(
            &tables,
            table,
            &fams[fam],
            &overrides,
            &mut table_ids,
            &mut contents,
            &mut out,
        );
        let t16_id = if t16 == "-" {
            None
        } else {
            Some(emit_table(
                &tables,
                t16,
                &fams[fam],
                &overrides,
                &mut table_ids,
                &mut contents,
                &mut out,
            ))
        };
        let mach = if mach == "-" {
            "None".to_string()
        } else {
            format!("Some({mach})")
        };
        let t16 = t16_id.map_or("None".to_string(), |i| format!("Some(OPS_{i})"));
        let t16_keys = t16_id.map_or("&[]".to_string(), |i| format!("OPS_{i}_BY_KEY"));
        let fam_uc = fam.to_uppercase();
        writeln!(tcode, "TargetDef {{ name: {name:?}, family: Family::{}, mach: {mach}, ops: OPS_{main_id}, ops_by_key: OPS_{main_id}_BY_KEY, ops_t16: {t16}, ops_t16_by_key: {t16_keys}, formats: FORMATS_{fam_uc}, fmt_by_top9: &FMT_BY_TOP9_{fam_uc}, sregs: &SREGS_{fam_uc}, sym: &SYM_{fam_uc}, pairs: &[{}] }},",
            family_variant(fam), pairs.get(table).map_or("", |s| s.as_str())).ok();
    }
    writeln!(out, "pub(crate) static TARGETS: &[TargetDef] = &[{tcode}];").ok();
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("tables.rs");
    std::fs::write(dest, out).expect("write tables.rs");
}

fn emit_table(
    tables: &Path,
    table: &str,
    fs: &[Fmt],
    overrides: &HashMap<String, (String, String)>,
    table_ids: &mut HashMap<String, usize>,
    contents: &mut HashMap<String, usize>,
    out: &mut String,
) -> usize {
    if !table_ids.contains_key(table) {
        let text = read(&tables.join(format!("ops/{table}.tsv")));
        let next = contents.len();
        let id = *contents.entry(text.clone()).or_insert(next);
        if id == next {
            let mut rows_v: Vec<(usize, u32, String, u8)> = Vec::new();
            for r in rows(&text) {
                let fi = fs
                    .iter()
                    .position(|f| f.name == r[0])
                    .expect("format of op row");
                let key: u32 = r[1].parse().expect("key");
                let probes: HashMap<&str, &str> = r[3]
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|p| p.rsplit_once(':').expect("probe"))
                    .collect();
                let psizes: Vec<String> = fs[fi]
                    .probes
                    .iter()
                    .map(|p| match probes.get(p.as_str()) {
                        Some(&"x") | None => "0".to_string(),
                        Some(s) => s.to_string(),
                    })
                    .collect();
                let mut mcid = Vec::new();
                for f in r[6].split(',').filter(|s| !s.is_empty()) {
                    mcid.push(match f {
                        "branch" => "MCID_BRANCH",
                        "cond" => "MCID_COND",
                        "indirect" => "MCID_INDIRECT",
                        "call" => "MCID_CALL",
                        "return" => "MCID_RETURN",
                        "terminator" => "MCID_TERMINATOR",
                        "barrier" => "MCID_BARRIER",
                        "load" => "MCID_LOAD",
                        "store" => "MCID_STORE",
                        "side" => "MCID_SIDE",
                        o => panic!("mcid {o}"),
                    });
                }
                let mcid = if mcid.is_empty() {
                    "0".to_string()
                } else {
                    mcid.join("|")
                };
                let imp = |s: &str| -> String {
                    let v: Vec<&str> = s
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .filter_map(|n| match n {
                            "EXEC" => Some("IMP_EXEC"),
                            "VCC" => Some("IMP_VCC"),
                            "SCC" => Some("IMP_SCC"),
                            "M0" => Some("IMP_M0"),
                            "MODE" => Some("IMP_MODE"),
                            "FLAT_SCR" => Some("IMP_FLAT_SCR"),
                            "EXEC_LO" => Some("IMP_EXEC_LO"),
                            "VCC_LO" => Some("IMP_VCC_LO"),
                            _ => None, // ASYNCcnt/TENSORcnt are counters, not registers
                        })
                        .collect();
                    if v.is_empty() {
                        "0".into()
                    } else {
                        v.join("|")
                    }
                };
                let mut ops = String::new();
                for o in r[10].split(',').filter(|s| !s.is_empty()) {
                    let p: Vec<&str> = o.split(':').collect();
                    let fidx = fs[fi]
                        .fields
                        .iter()
                        .position(|f| f.0 == p[0])
                        .expect("operand field");
                    let width = if p[2] == "h" {
                        0
                    } else {
                        p[2].parse::<u8>().expect("width")
                    };
                    let file = match p[3] {
                        "v" => "RegFile::Vgpr",
                        "a" => "RegFile::Agpr",
                        _ => "RegFile::Scalar",
                    };
                    write!(
                        ops,
                        "OperandDef {{ field: {fidx}, def: {}, width: {width}, file: {file} }},",
                        p[1] == "d"
                    )
                    .ok();
                }
                let mn = r[5];
                let (special, flow) = match overrides.get(mn) {
                    Some((s, f)) => (
                        s.clone(),
                        if f == "-" {
                            "None".to_string()
                        } else {
                            format!("Some(Flow::{f})")
                        },
                    ),
                    None => ("None".to_string(), "None".to_string()),
                };
                let special = match special.as_str() {
                    "TtraceDataImm" => "TtraceDataImm(0)".to_string(),
                    s => s.to_string(),
                };
                let my = r.get(11).copied().unwrap_or("");
                let asm = r.get(12).copied().unwrap_or("");
                let size: u8 = r[2].parse().expect("size");
                let mods = mods_literal(r.get(13).copied().unwrap_or(""));
                rows_v.push((fi, key, format!(
                        "OpRow {{ fmt: {fi}, key: {key}, probe_sizes: &[{}], mc_name: {:?}, mnemonic: {:?}, mnemonic_y: {:?}, mcid: {mcid}, tsflags: {:#x}, imp_uses: {}, imp_defs: {}, operands: &[{ops}], special: Special::{special}, flow: {flow}, asm: {asm:?}, mods: &[{mods}] }},",
                        psizes.join(","), r[4], mn, my, u64::from_str_radix(r[7], 16).expect("tsflags"), imp(r[8]), imp(r[9])
                    ), size));
            }
            rows_v.sort_by_key(|r| (r.0, r.1));
            // Direct opcode index per format: entry `key` holds (row index + 1) | size << 16
            // (0 = no opcode), so decoding reads the size without touching the row.
            let mut by_key: Vec<Vec<u32>> = fs
                .iter()
                .map(|f| {
                    assert!(f.op_width <= 12, "{}: opcode wider than 12 bits", f.name);
                    vec![0u32; 1 << f.op_width]
                })
                .collect();
            for (i, r) in rows_v.iter().enumerate() {
                let slot = &mut by_key[r.0][r.1 as usize];
                assert_eq!(
                    *slot, 0,
                    "{table}: duplicate opcode {} {}",
                    fs[r.0].name, r.1
                );
                let idx = u16::try_from(i + 1).expect("opcode table under 65535 rows");
                *slot = u32::from(idx) | u32::from(r.3) << 16;
            }
            write!(out, "static OPS_{id}: &[OpRow] = &[").ok();
            for r in rows_v {
                out.push_str(&r.2);
                out.push('\n');
            }
            out.push_str("];\n");
            write!(out, "static OPS_{id}_BY_KEY: &[&[u32]] = &[").ok();
            for k in by_key {
                write!(out, "&{k:?},").ok();
            }
            out.push_str("];\n");
        }
        table_ids.insert(table.to_string(), id);
    }
    table_ids[table]
}

/// Rust literal of the `mods` column (VOP3/VOP3P modifier facts, see `tools/isa-gen/isa-dump.cpp`
/// `modFacts`): `abs=<mask>`, `neg=<mask>`, `lit16=<mask>`, `fpc16=<mask>`, `fake16=<mask>`,
/// `acc_cd=<mask>`, `acc=<mask>`, `cbsz`, `abid`, `blgp`, `<list>=<n>:<slots>[:<default>]`,
/// `bitop3`, `clamp`, `omod`.
fn mods_literal(col: &str) -> String {
    let mut out = String::new();
    for e in col.split(';').filter(|e| !e.is_empty()) {
        let (name, val) = e.split_once('=').unwrap_or((e, ""));
        let item = match name {
            "abs" => format!("Mod::Abs({val})"),
            "neg" => format!("Mod::Neg({val})"),
            "lit16" => format!("Mod::Lit16({val})"),
            "fpc16" => format!("Mod::Fpc16({val})"),
            "fake16" => format!("Mod::Fake16({val})"),
            "bitop3" => "Mod::BitOp3".to_string(),
            "acc_cd" => format!("Mod::AccCd({val})"),
            "acc" => format!("Mod::Acc({val})"),
            "cbsz" => "Mod::Cbsz".to_string(),
            "abid" => "Mod::Abid".to_string(),
            "blgp" => "Mod::Blgp".to_string(),
            "clamp" => "Mod::Clamp".to_string(),
            "omod" => "Mod::Omod".to_string(),
            _ => {
                let kind = match name {
                    "op_sel" => "OpSel",
                    "op_sel_hi" => "OpSelHi",
                    "neg_lo" => "NegLo",
                    "neg_hi" => "NegHi",
                    _ => panic!("unknown modifier {name}"),
                };
                let p: Vec<&str> = val.split(':').collect();
                let mut slots = [u8::MAX; 4];
                for (i, c) in p[1].chars().enumerate() {
                    if let Some(d) = c.to_digit(10) {
                        slots[i] = d as u8;
                    }
                }
                let def = p.get(2).copied().unwrap_or("0");
                format!("Mod::List(ListKind::{kind}, {}, {slots:?}, {def})", p[0])
            }
        };
        out.push_str(&item);
        out.push(',');
    }
    out
}
